package redact

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestBuiltinAndUserKeys(t *testing.T) {
	in := "password = \"hunter2\"\nclient_secret = \"abc\"\nheaders = { X-Harbor-Sig = \"k-1\" }\nplain = \"keep\"\n"
	out := Text(in)
	if !strings.Contains(out, `password = "<redacted>"`) || !strings.Contains(out, "client_secret") || strings.Contains(out, `"abc"`) {
		t.Fatalf("built-in keys: %s", out)
	}
	if !strings.Contains(out, `k-1`) {
		t.Fatalf("X-Harbor-Sig is not a built-in name and must survive before it is listed:\n%s", out)
	}
	Add("X-Harbor-Sig", `plugins."io.containerd.grpc.v1.cri".registry.headers`)
	out = Text(in)
	if strings.Contains(out, "k-1") || strings.Contains(out, "hunter2") || !strings.Contains(out, `plain = "keep"`) {
		t.Fatalf("user-listed key not redacted, or too much redacted:\n%s", out)
	}
	if !Key(`plugins."io.containerd.grpc.v1.cri".registry.headers.Foo`, []string{"plugins", "io.containerd.grpc.v1.cri", "registry", "headers", "Foo"}) {
		t.Fatal("a key under a user-listed path must be redacted")
	}
	if Key(`plugins."io.containerd.grpc.v1.cri".registry.config_path`, []string{"plugins", "io.containerd.grpc.v1.cri", "registry", "config_path"}) {
		t.Fatal("config_path is no credential")
	}
	// The user path is found by structure too.
	toml := "[plugins.\"io.containerd.grpc.v1.cri\".registry.headers]\n  Foo = [\"k-2\"]\n"
	if out := Content("/etc/containerd/config.toml", []byte(toml)); strings.Contains(out, "k-2") {
		t.Fatalf("value under a user-listed path shown:\n%s", out)
	}
}

func TestName(t *testing.T) {
	for k, want := range map[string]bool{
		"password": true, "DB_PASSWORD": true, "client-secret": true, "X-Api-Key": true, "registry.auth": true,
		"identitytoken": true, "credentials": true, "private_key": true, "access_token": true, "ansible_ssh_pass": true, "ansible_become_password": true,
		"config_path": false, "oauth": false, "password_file": false, "tokens_dir": false, "username": false, "key": false,
	} {
		if got := Name(k); got != want {
			t.Errorf("Name(%q) = %v, want %v", k, got, want)
		}
	}
}

// noSecret fails when any of the secrets is in out, or a kept string is not.
func noSecret(t *testing.T, what, out string, secrets, keep []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("%s: %q shown:\n%s", what, s, out)
		}
	}
	for _, k := range keep {
		if !strings.Contains(out, k) {
			t.Errorf("%s: %q lost:\n%s", what, k, out)
		}
	}
}

// The first reproduction: a docker config.json on one line.
func TestOneLineJSON(t *testing.T) {
	in := `{"auths":{"harbor.lab":{"auth":"cm9ib3Q6UzNjcjN0LWpzb24="}},"credsStore":"none"}` + "\n"
	secrets := []string{"cm9ib3Q6UzNjcjN0LWpzb24="}
	noSecret(t, "Content(config.json)", Content("/root/.docker/config.json", []byte(in)), secrets, []string{`"harbor.lab"`, `"credsStore":"none"`})
	noSecret(t, "Content(no extension)", Content("/etc/auth", []byte(in)), secrets, []string{`"harbor.lab"`})
	noSecret(t, "Text", Text("wrote "+in), secrets, []string{"wrote "})
	// Cut short, it does not parse: the line is hidden from the key on.
	noSecret(t, "Text(truncated)", Text(in[:40]), []string{"cm9ib3Q6"}, nil)
	// Pretty-printed, and with a credential whose value is an object.
	pretty := "{\n  \"registry\": {\n    \"credentials\": {\"user\": \"u\", \"pass\": \"S3cr3t-obj\"},\n    \"url\": \"https://harbor.lab\"\n  }\n}\n"
	noSecret(t, "Content(pretty)", Content("x.json", []byte(pretty)), []string{"S3cr3t-obj"}, []string{`"url": "https://harbor.lab"`, `"user"`})
}

// The second reproduction: a TOML multi-line string.
func TestTOMLMultiline(t *testing.T) {
	in := "[db]\n  user = \"app\"\n  password = \"\"\"\nS3cr3t-line-1\n  S3cr3t-line-2\"\"\"\n  port = 5432 # default\n" +
		"  token = '''\nS3cr3t-literal\n'''\n  extra = { Authorization = \"Bearer S3cr3t-inline\", Accept = \"json\" } # was: password = S3cr3t-comment\n"
	secrets := []string{"S3cr3t"}
	keep := []string{`user = "app"`, "port = 5432 # default", `Accept = "json"`}
	noSecret(t, "Content", Content("/etc/app/app.toml", []byte(in)), secrets, keep)
	// A message quoting it is read line by line: the value's lines go too.
	noSecret(t, "Text", Text("validate failed:\n"+in), secrets, []string{`user = "app"`, "port = 5432"})
	// Without an extension it is recognised as TOML.
	noSecret(t, "Content(no extension)", Content("/etc/app/conf", []byte(in)), secrets, keep)
}

func TestYAML(t *testing.T) {
	in := "registry:\n  url: https://harbor.lab\n  password: |\n    S3cr3t-block-1\n    S3cr3t-block-2\n" +
		"  token: >-\n    S3cr3t-folded\n  # a comment\n  user: bob\n  flow: {secret: S3cr3t-flow, keep: k1}\n" +
		"  quoted: \"x\"\n  apikey: \"S3cr3t-dq\n    continued\"\n  list:\n    - credentials: 'S3cr3t-sq'\n    - plain\n" +
		"anchors:\n  base: &pw S3cr3t-anchored\n  password: *pw\n---\nauth:\n  - S3cr3t-seq\n  - S3cr3t-seq2\nother: visible\n"
	out := Content("/etc/app/values.yaml", []byte(in))
	noSecret(t, "Content", out, []string{"S3cr3t", "continued"}, []string{"url: https://harbor.lab", "  # a comment\n  user: bob", "keep: k1", "- plain", "other: visible", "---"})
	// The same, found without the extension.
	noSecret(t, "Content(no extension)", Content("/etc/app/values", []byte(in)), []string{"S3cr3t"}, []string{"user: bob"})
	// Line by line (a message), block scalars go with their key.
	noSecret(t, "Text", Text(in), []string{"S3cr3t-block", "S3cr3t-folded", "S3cr3t-flow", "S3cr3t-dq", "S3cr3t-sq", "S3cr3t-seq"}, []string{"user: bob"})
}

func TestINI(t *testing.T) {
	in := "[client]\nuser = app\npassword = S3cr3t-ini\nsecret_key = S3cr3t-ini-2 \\\n  S3cr3t-ini-3\nhost = db.lab\n"
	noSecret(t, "Content", Content("/etc/mysql/my.cnf", []byte(in)), []string{"S3cr3t"}, []string{"user = app", "host = db.lab"})
	// A systemd drop-in's Environment= line.
	unit := "[Service]\nEnvironment=\"HTTPS_PROXY=http://proxy:3128\"\nEnvironment=\"REGISTRY_TOKEN=S3cr3t-env\"\n"
	noSecret(t, "Content(unit)", Content("/etc/systemd/system/containerd.service.d/x.conf", []byte(unit)), []string{"S3cr3t"}, []string{"HTTPS_PROXY=http://proxy:3128"})
}

func TestShapes(t *testing.T) {
	in := "key material:\n-----BEGIN RSA PRIVATE KEY-----\nMIIS3cr3t\nabc\n-----END RSA PRIVATE KEY-----\nendpoint = https://robot:S3cr3t-url@harbor.lab/v2\n"
	noSecret(t, "Text", Text(in), []string{"MIIS3cr3t", "S3cr3t-url"}, []string{"https://robot:", "@harbor.lab/v2", "BEGIN RSA PRIVATE KEY"})
}

func TestValues(t *testing.T) {
	AddVars(map[string]any{
		"db_password": "hunter22 'quoted'",
		"registry":    map[string]any{"url": "https://h", "token": "tok-abcdef"},
		"pin_token":   12345678,
		"plain":       "visible-value",
		"short_token": "abc",
	})
	in := fmt.Sprintf("run %q\nargv: mysql -p'hunter22 '\\''quoted'\\'''\n{\"t\":\"tok-abcdef\"} 12345678 visible-value abc\n", "mysql --password=hunter22 'quoted'")
	out := Text(in)
	noSecret(t, "Text", out, []string{"hunter22", "tok-abcdef", "12345678"}, []string{"visible-value", " abc"})
	// A quoted form inside a file, too.
	out = Content("x.toml", []byte("note = "+strconv.Quote("tok-abcdef")+"\n"))
	noSecret(t, "Content", out, []string{"tok-abcdef"}, []string{"note = "})
}

// Structure is kept around what is hidden, and a value that changes
// shows as a change of nothing visible.
func TestStructureKept(t *testing.T) {
	before := "a = 1\npassword = \"\"\"\nold\n\"\"\"\nb = 2\n"
	after := "a = 1\npassword = \"\"\"\nnew\nlonger\n\"\"\"\nb = 2\n"
	if x, y := Content("c.toml", []byte(before)), Content("c.toml", []byte(after)); x != y || x != "a = 1\npassword = \"<redacted>\"\nb = 2\n" {
		t.Fatalf("redacted texts differ or lost their structure:\n%s\n--\n%s", x, y)
	}
	crlf := "user = \"u\"\r\npassword = \"p\"\r\n"
	if got := Content("c.toml", []byte(crlf)); got != "user = \"u\"\r\npassword = \"<redacted>\"\r\n" {
		t.Fatalf("CRLF lost: %q", got)
	}
}
