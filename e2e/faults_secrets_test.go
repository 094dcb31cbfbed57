package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"nodeconverge/lab/labtest"
)

// Secret probes of issue 11 item 6. Every secret below is a distinct
// marker; the tests assert that no marker appears in stdout, stderr, a
// JSON or Prometheus report, or a saved plan outside the parts the plan
// must carry to apply (file contents, the command's argv, the arguments a
// re-check needs), and that the nodes got the real values.
const (
	// secretInv is an inventory var whose name looks secret: masked
	// wherever it appears, no_log or not.
	secretInv = "S3cr3t-inv-pw-71c2"
	// secretArg is an inventory var with a plain name: hidden only where
	// no_log hides it.
	secretArg  = "S3cr3t-unnamed-9f3e"
	secretJSON = "S3cr3t-json-auth-4e1a"
	secretTOML = "S3cr3t-toml-line-8b2d"
	secretYAML = "S3cr3t-yaml-block-0c9a"
	secretINI  = "S3cr3t-ini-5d7e"
	// The same files' secrets before a live update.
	secretOldJSON = "S3cr3t-old-json-11aa"
	secretOldTOML = "S3cr3t-old-toml-22bb"
)

var allSecrets = []string{secretInv, secretArg, secretJSON, secretTOML, secretYAML, secretINI, secretOldJSON, secretOldTOML}

// secretInventory is the lab's inventory with the probes' variables.
func secretInventory(t *testing.T, l *labtest.Lab) string {
	t.Helper()
	b, err := os.ReadFile(l.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "      vars:\n"
	if !strings.Contains(string(b), anchor) {
		t.Fatalf("no group vars in the lab inventory:\n%s", b)
	}
	inv := strings.Replace(string(b), anchor, anchor+"        registry_password: \""+secretInv+"\"\n        login_arg: \""+secretArg+"\"\n", 1)
	p := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(p, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// secretFiles is the copy tasks' files: the one-line JSON and
// multi-line TOML, a YAML block scalar and an INI password.
func secretFiles(jsonSecret, tomlSecret string) string {
	return `
    - name: docker config on one line
      copy:
        dest: /etc/containerd/docker-config.json
        content: '{"auths":{"harbor.lab":{"auth":"` + jsonSecret + `"}}}'
    - name: app config with a multi-line password
      copy:
        dest: /etc/containerd/app.toml
        content: |
          [db]
          user = "app"
          password = """
          ` + tomlSecret + `
          """
    - name: values with a block scalar
      copy:
        dest: /etc/containerd/values.yaml
        content: |
          registry:
            token: |
              ` + secretYAML + `
            user: robot
    - name: ini password
      copy:
        dest: /etc/containerd/my.cnf
        content: "[client]\npassword = ` + secretINI + `\nhost = db.lab\n"
`
}

const secretCommands = `
    - name: log in (no_log)
      no_log: true
      command:
        argv: [sh, -c, 'printf "%s %s\n" "$1" "$2" > /etc/containerd/login.out; echo "logged in with $1 and $2"', sh, "{{ registry_password }}", "{{ login_arg }}"]
    - name: no_log copy of a plain-named secret
      no_log: true
      copy:
        dest: /etc/containerd/nolog.txt
        content: "{{ login_arg }}\n"
    - name: echo the secret-named var without no_log
      command:
        argv: [echo, "token {{ registry_password }}"]
`

// noSecretIn fails for every marker found in what.
func noSecretIn(t *testing.T, what, s string) {
	t.Helper()
	for _, m := range allSecrets {
		if strings.Contains(s, m) {
			t.Errorf("%s shows secret %q:\n%s", what, m, s)
		}
	}
}

// shownPlanParts is a saved plan without what it must carry to apply:
// file contents, arguments and module data.
func shownPlanParts(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("saved plan: %v", err)
	}
	hosts, _ := p["hosts"].([]any)
	for _, h := range hosts {
		steps, _ := h.(map[string]any)["steps"].([]any)
		for _, s := range steps {
			st := s.(map[string]any)
			delete(st, "contents")
			delete(st, "args")
			if pl, ok := st["plan"].(map[string]any); ok {
				delete(pl, "data")
			}
		}
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestFaultSecretsNotPrinted: check mode with --diff -v, a saved plan and
// its apply, and a live apply that updates secret-holding files: no
// secret byte in any output, report or the saved plan's shown parts; the
// plan file is 0600; the nodes got the real values.
func TestFaultSecretsNotPrinted(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
	inv := secretInventory(t, l)
	args := func(extra ...string) []string {
		return append([]string{"-i", inv, "--known-hosts", l.KnownHosts, "--ssh-config", "/dev/null"}, extra...)
	}
	pb := writePlaybook(t, "- name: secrets\n  hosts: all\n  tasks:"+secretFiles(secretJSON, secretTOML)+secretCommands)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	var outputs []result
	check, _ := ncBounded(t, 120*time.Second, append([]string{"apply", "--check", "--diff", "-v", "--out", plan,
		"--report", "json=" + filepath.Join(dir, "check.json"), "--report", "jsonl=" + filepath.Join(dir, "check.jsonl"),
		"--report", "prom=" + filepath.Join(dir, "check.prom")}, args(pb)...)...)
	wantCode(t, check, 2)
	outputs = append(outputs, check)
	// The diff is shown, with the values redacted by structure.
	for _, want := range []string{`{"auths":{"harbor.lab":{"auth":"<redacted>"}}}`, `+password = "<redacted>"`, "+  token: \"<redacted>\"", "+  user: robot", `+password = "<redacted>"`} {
		if !strings.Contains(check.stdout, want) {
			t.Errorf("check --diff lacks %q:\n%s", want, check)
		}
	}
	if !strings.Contains(check.stdout, "(diff hidden: no_log: true)") {
		t.Errorf("check --diff does not say a no_log task's diff is hidden:\n%s", check)
	}
	fi, err := os.Stat(plan)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("saved plan mode %04o, want 0600", fi.Mode().Perm())
	}
	noSecretIn(t, "saved plan (outside contents, args and data)", shownPlanParts(t, plan))

	applied, _ := ncBounded(t, 120*time.Second, append([]string{"apply", "--diff", "-v", "--report", "json=" + filepath.Join(dir, "plan-apply.json")}, args(plan)...)...)
	wantCode(t, applied, 0)
	outputs = append(outputs, applied)
	if !strings.Contains(applied.stdout, "token <redacted>") {
		t.Errorf("the secret-named var should show masked in the echo's output:\n%s", applied)
	}
	if !strings.Contains(applied.stdout, "no_log") {
		t.Errorf("applying the plan does not say a no_log task's output was hidden:\n%s", applied)
	}
	// The command got the real values: masking is of views only.
	for _, n := range l.Nodes {
		b, err := os.ReadFile(l.NodePath(n.Name, "/etc/containerd/login.out"))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != secretInv+" "+secretArg+"\n" {
			t.Errorf("%s: login.out = %q, want the real values", n.Name, b)
		}
	}

	// A live apply that updates files holding other secrets: the diff
	// has the old and the new value, both hidden.
	for _, n := range l.Nodes {
		for path, content := range map[string]string{
			"/etc/containerd/docker-config.json": `{"auths":{"harbor.lab":{"auth":"` + secretOldJSON + `"}}}`,
			"/etc/containerd/app.toml":           "[db]\nuser = \"app\"\npassword = \"\"\"\n" + secretOldTOML + "\n\"\"\"\n",
		} {
			if err := os.WriteFile(l.NodePath(n.Name, path), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Streamed only: the run forgets each host's results once its line is
	// written (no JSON report keeps them).
	live, _ := ncBounded(t, 120*time.Second, append([]string{"apply", "--diff", "-v", "--report", "jsonl=" + filepath.Join(dir, "live.jsonl"),
		"--report", "prom=" + filepath.Join(dir, "live.prom")}, args(pb)...)...)
	wantCode(t, live, 0)
	outputs = append(outputs, live)
	if !strings.Contains(live.stdout, "update /etc/containerd/docker-config.json") || !strings.Contains(live.stdout, "only redacted credential values differ") {
		t.Errorf("the live apply should show the updates as changes of redacted values:\n%s", live)
	}

	for i, o := range outputs {
		noSecretIn(t, "run "+string(rune('0'+i))+" stdout", o.stdout)
		noSecretIn(t, "run "+string(rune('0'+i))+" stderr", o.stderr)
	}
	for _, f := range []string{"check.json", "check.jsonl", "check.prom", "plan-apply.json", "live.jsonl", "live.prom"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		noSecretIn(t, "report "+f, string(b))
		if strings.HasSuffix(f, ".json") && !strings.Contains(string(b), `"no_log": true`) ||
			strings.HasSuffix(f, ".jsonl") && !strings.Contains(string(b), `"no_log":true`) {
			t.Errorf("report %s does not mark the no_log results", f)
		}
	}
	sameResultsPerHost(t, filepath.Join(dir, "check.json"), filepath.Join(dir, "check.jsonl"), len(l.Nodes))
	hostLines(t, filepath.Join(dir, "live.jsonl"), len(l.Nodes))
}

// hostLines reads a streamed report, checks its run, host and end lines,
// and returns each host line's results by host.
func hostLines(t *testing.T, path string, hosts int) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != hosts+2 {
		t.Fatalf("%s: %d lines, want a run line, %d host lines and an end line:\n%s", path, len(lines), hosts, b)
	}
	out := map[string]any{}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s line %d: %v", path, i+1, err)
		}
		want := "host"
		switch i {
		case 0:
			want = "run"
		case len(lines) - 1:
			want = "end"
		}
		if m["type"] != want {
			t.Errorf("%s line %d is %v, want %s", path, i+1, m["type"], want)
		}
		if want == "host" {
			out[m["host"].(string)] = m["results"]
		}
	}
	return out
}

// sameResultsPerHost: the streamed report's results are the JSON report's,
// host by host, in the same order.
func sameResultsPerHost(t *testing.T, jsonPath, jsonlPath string, hosts int) {
	t.Helper()
	streamed := hostLines(t, jsonlPath, hosts)
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	whole := map[string][]any{}
	for _, r := range doc.Results {
		h := r["host"].(string)
		whole[h] = append(whole[h], any(r))
	}
	if len(whole) != hosts {
		t.Errorf("JSON report has results of %d hosts, want %d", len(whole), hosts)
	}
	for h, rs := range whole {
		if !reflect.DeepEqual(streamed[h], any(rs)) {
			t.Errorf("%s: streamed results differ from the JSON report's:\n%v\n%v", h, streamed[h], rs)
		}
	}
}

// TestFaultSecretsNoLogFailure: a no_log command that fails printing its
// secret argument, after the run wrote to the host: the failure, the
// rollback and the later tasks' messages say what happened without the
// secret, in the human output and the JSON report; a secret-named var in a
// command that fails without no_log is masked in its error.
func TestFaultSecretsNoLogFailure(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
	inv := secretInventory(t, l)
	args := func(extra ...string) []string {
		return append([]string{"-i", inv, "--known-hosts", l.KnownHosts, "--ssh-config", "/dev/null"}, extra...)
	}
	fail := l.Nodes[0].Name
	pb := writePlaybook(t, `
- name: failing secrets
  hosts: all
  tasks:
    - name: write a file first
      copy:
        dest: /etc/containerd/first.txt
        content: "first\n"
    - name: log in (no_log)
      no_log: true
      command:
        argv: [sh, -c, 'echo "login with $1 failed" >&2; [ "$2" != `+fail+` ]', sh, "{{ login_arg }}", "{{ inventory_hostname }}"]
    - name: echo the secret-named var, failing
      command:
        argv: [sh, -c, 'echo "bad token $1" >&2; exit 3', sh, "{{ registry_password }}"]
`)
	dir := t.TempDir()
	r, _ := ncBounded(t, 120*time.Second, append([]string{"apply", "--diff", "-v", "--report", "json=" + filepath.Join(dir, "r.json")}, args(pb)...)...)
	wantCode(t, r, 1)
	noSecretIn(t, "stdout", r.stdout)
	noSecretIn(t, "stderr", r.stderr)
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	noSecretIn(t, "JSON report", string(b))
	for _, want := range []string{
		"failed: [" + fail + "] => the output has been hidden due to the fact that 'no_log: true' was specified for this result; rolled back this host's run: restored 1 file",
		"bad token <redacted>",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r)
		}
	}
	// The other host's later failure names the no_log command it ran by
	// its task, not its text.
	if !strings.Contains(r.stdout, `the command of no_log task "log in (no_log)"`) {
		t.Errorf("the rollback after the no_log command should name it by its task:\n%s", r)
	}
	if _, err := os.Stat(l.NodePath(fail, "/etc/containerd/first.txt")); !os.IsNotExist(err) {
		t.Errorf("%s was not rolled back: first.txt: %v", fail, err)
	}

	// Arguments that do not validate: the error of a no_log task says
	// so without the value; a secret-named var's value is masked.
	bad := writePlaybook(t, `
- hosts: all
  tasks:
    - name: bad dest (no_log)
      no_log: true
      copy: {dest: "{{ login_arg }}", content: x}
    - name: bad dest
      copy: {dest: "{{ registry_password }}", content: x}
`)
	r, _ = ncBounded(t, 60*time.Second, append([]string{"apply"}, args(bad)...)...)
	wantCode(t, r, 1)
	noSecretIn(t, "render error", r.stdout+r.stderr)
	if !strings.Contains(r.stderr, `task "bad dest (no_log)": its arguments do not render or validate (details hidden: no_log: true)`) ||
		!strings.Contains(r.stderr, `dest "<redacted>" must be an absolute path`) {
		t.Errorf("want both render errors, without the values:\n%s", r)
	}
}

// TestFaultSecretsContainerd: registry credentials written as TOML
// multi-line and literal strings in containerd's config, on both
// containerd generations: the shipped playbook's check --diff -v (omen's
// repair diff has them in its context lines), its apply and the reports
// show none of them.
func TestFaultSecretsContainerd(t *testing.T) {
	const multi, literal = "S3cr3t-ctr-multi-3a9f", "S3cr3t-ctr-literal-6c1e"
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident", NoContainerd: true, ContainerdBin: labtest.Containerd(t, g.gen)})
			auth := "\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"harbor.lab\".auth]\n  username = \"robot\"\n  password = \"\"\"\n" +
				multi + "\"\"\"\n  identitytoken = '''\n" + literal + "'''\n"
			for _, n := range l.Nodes {
				p := l.NodePath(n.Name, "/etc/containerd/config.toml")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				s := strings.Replace(string(b), "SystemdCgroup = true\n", "SystemdCgroup = true\n"+auth, 1)
				if s == string(b) {
					t.Fatalf("%s: no anchor for the secret", n.Name)
				}
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			pb := shippedPlaybook()
			check, _ := ncBounded(t, 300*time.Second, append([]string{"apply", "--check", "--diff", "-v", "--report", "json=" + filepath.Join(dir, "c.json")}, labArgs(l, pb)...)...)
			if !strings.Contains(check.stdout, `password = "<redacted>"`) {
				t.Errorf("the check-mode diff should show omen's repair with the password redacted:\n%s", check)
			}
			apply, _ := ncBounded(t, 300*time.Second, append([]string{"apply", "--diff", "-v", "--report", "json=" + filepath.Join(dir, "a.json")}, labArgs(l, pb)...)...)
			for i, o := range []result{check, apply} {
				for _, s := range []string{multi, literal} {
					if strings.Contains(o.stdout+o.stderr, s) {
						t.Errorf("run %d shows %q:\n%s", i, s, o)
					}
				}
			}
			for _, f := range []string{"c.json", "a.json"} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range []string{multi, literal} {
					if strings.Contains(string(b), s) {
						t.Errorf("report %s shows %q", f, s)
					}
				}
			}
		})
	}
}
