package report

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"nodeconverge/engine/module"
)

func TestRedactText(t *testing.T) {
	in := "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"harbor\".auth]\n  username = \"robot\"\n  password = \"hunter2\"\r\n  identitytoken = 'tok-123'\nauths = { \"h\" = { auth = \"dXNlcjpwYXNz\" } }\nconfig_path = \"/etc/containerd/certs.d\"\n"
	out := RedactText(in)
	for _, secret := range []string{"hunter2", "tok-123", "dXNlcjpwYXNz"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q survived redaction:\n%s", secret, out)
		}
	}
	for _, keep := range []string{"username = \"robot\"", "config_path = \"/etc/containerd/certs.d\"", "password = \"<redacted>\"\r\n"} {
		if !strings.Contains(out, keep) {
			t.Errorf("%q lost:\n%s", keep, out)
		}
	}
}

func TestPlanDiffRedacts(t *testing.T) {
	p := &module.Plan{Files: []module.FileChange{{Action: module.Update, Path: "/etc/x.toml",
		Before: []byte("password = \"old-secret\"\n"), After: []byte("password = \"new-secret\"\n")}}}
	d := PlanDiff("h", p)
	if strings.Contains(d, "old-secret") || strings.Contains(d, "new-secret") || !strings.Contains(d, "only redacted credential values differ") {
		t.Fatalf("diff shows a password:\n%s", d)
	}
}

// promLine is the text exposition format's sample line: name, optional
// labels, a float value.
var promLine = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\})? -?[0-9.eE+-]+$`)

func TestPromTextfileParses(t *testing.T) {
	r := NewRun("id", true)
	r.Add(&TaskResult{Host: "nuc1", Status: Changed})
	r.Add(&TaskResult{Host: "omen", Status: Failed})
	r.Add(&TaskResult{Host: "nuc2", Status: OK})
	r.Finished = time.Unix(1764450000, 0)
	var b bytes.Buffer
	if err := WriteProm(&b, r); err != nil {
		t.Fatal(err)
	}
	typed := map[string]bool{}
	values := map[string]string{}
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 || f[3] != "gauge" {
				t.Fatalf("bad TYPE line %q", line)
			}
			typed[f[2]] = true
		case strings.HasPrefix(line, "# HELP "):
		default:
			if !promLine.MatchString(line) {
				t.Fatalf("not a valid sample line: %q", line)
			}
			name := line[:strings.IndexAny(line, "{ ")]
			if !typed[name] {
				t.Fatalf("sample %q before its TYPE line", line)
			}
			sp := strings.LastIndex(line, " ")
			values[line[:sp]] = line[sp+1:]
		}
	}
	want := map[string]string{
		`nodeconverge_drift{host="nuc1"}`:                          "1",
		`nodeconverge_failed{host="omen"}`:                         "1",
		`nodeconverge_drift{host="nuc2"}`:                          "0",
		`nodeconverge_last_success_timestamp_seconds{host="nuc2"}`: "1764450000",
		`nodeconverge_run_exit_code`:                               "1",
	}
	for k, v := range want {
		if values[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, values[k], v, values)
		}
	}
	if _, ok := values[`nodeconverge_last_success_timestamp_seconds{host="nuc1"}`]; ok {
		t.Errorf("a drifted host must not get a success timestamp in check mode")
	}
}
