package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"nodeconverge/engine/module"
	"nodeconverge/engine/redact"
	"nodeconverge/engine/safetext"
)

func TestRedactText(t *testing.T) {
	in := "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"harbor\".auth]\n  username = \"robot\"\n  password = \"hunter2\"\r\n  identitytoken = 'tok-123'\nauths = { \"h\" = { auth = \"dXNlcjpwYXNz\" } }\nconfig_path = \"/etc/containerd/certs.d\"\n"
	out := redact.Text(in)
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
	// Parse with Prometheus' own text-format parser (the one node_exporter's
	// textfile collector uses), so the file is checked against the format's
	// rules rather than our reading of them.
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(&b)
	if err != nil {
		t.Fatalf("textfile does not parse: %v\n%s", err, b.String())
	}
	values := map[string]string{}
	for name, mf := range families {
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is %v, want gauge", name, mf.GetType())
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
		for _, m := range mf.GetMetric() {
			key := name
			if lp := m.GetLabel(); len(lp) > 0 {
				var ls []string
				for _, l := range lp {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				key += "{" + strings.Join(ls, ",") + "}"
			}
			values[key] = strconv.FormatFloat(m.GetGauge().GetValue(), 'f', -1, 64)
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

func TestPromCarriesLastSuccessForward(t *testing.T) {
	r := NewRun("id", true)
	r.Add(&TaskResult{Host: "nuc1", Status: Changed})
	r.Finished = time.Unix(1764460000, 0)
	var b bytes.Buffer
	if err := WritePromSince(&b, r, map[string]int64{"nuc1": 1764450000}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `nodeconverge_last_success_timestamp_seconds{host="nuc1"} 1764450000`) {
		t.Fatalf("a drifting host must keep its previous success time:\n%s", b.String())
	}
}

// A node's text reaches the human output with its control bytes as
// visible escapes, and no value starts a line of its own.
func TestHumanEscapesNodeText(t *testing.T) {
	var out bytes.Buffer
	h := &Human{W: &out, Diff: true}
	h.PlayStart("p\x1b]0;t\x07", []string{"a"})
	h.TaskStart("t\nok: [b]", false)
	p := &module.Plan{Files: []module.FileChange{{Action: module.Update, Path: "/etc/x\nok: [b] => {}",
		Before: []byte("a = 1 # \x00 \x1b[2J\r\n"), After: []byte("a = 2 # \x00 \x1b[2J\r\n")}}}
	h.Result(&TaskResult{Host: "a\nb : ok=1", Status: Changed, Plan: p, Msg: "two\nok: [b] lines \x1b[31m"})
	r := NewRun("id", false)
	r.Add(&TaskResult{Host: "a\nb : ok=1", Status: Changed})
	r.Errors = append(r.Errors, "failed\nok: [b] \x07")
	h.Done(r)
	got := out.String()
	for _, c := range got {
		if c != '\n' && c != '\t' && (c < 0x20 || c == 0x7f) {
			t.Fatalf("raw control character %q in\n%s", c, got)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "ok: [b]") || strings.HasPrefix(l, "b : ok") {
			t.Errorf("a forged line %q in\n%s", l, got)
		}
	}
	for _, want := range []string{`PLAY [p\x1b]0;t\x07]`, `TASK [t\nok: [b]]`, `changed: [a\nb : ok=1] update /etc/x\nok: [b] => {}`,
		`-a = 1 # \x00 \x1b[2J\r`, `    ok: [b] lines \x1b[31m`, `a\nb : ok=1 : ok=0 changed=1`, `failed` + "\n" + `  ok: [b] \x07`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// The reproductions: with --diff, a one-line docker config.json
// printed its auth value, and a TOML multi-line password printed its value
// line.
func TestPlanDiffRedactsByStructure(t *testing.T) {
	for _, c := range []struct{ path, before, after, secret, keep string }{
		{"/root/.docker/config.json", "", `{"auths":{"harbor.lab":{"auth":"cm9ib3Q6UzNjcjN0LWpzb24="}}}` + "\n", "cm9ib3Q6UzNjcjN0LWpzb24=", "harbor.lab"},
		{"/etc/app/db.toml", "[db]\nuser = \"app\"\n", "[db]\nuser = \"app\"\npassword = \"\"\"\nS3cr3t-multi-line\n\"\"\"\n", "S3cr3t-multi-line", `+password = "<redacted>"`},
	} {
		action := module.Update
		if c.before == "" {
			action = module.Create
		}
		p := &module.Plan{Files: []module.FileChange{{Action: action, Path: c.path, Before: []byte(c.before), After: []byte(c.after)}}}
		d := PlanDiff("h", p)
		if strings.Contains(d, c.secret) || !strings.Contains(d, c.keep) {
			t.Errorf("%s: diff shows the secret or lost %q:\n%s", c.path, c.keep, d)
		}
	}
}

// TestNoLogHidesEverywhere: a no_log task's arguments, plan, diff, output
// and message appear in no view: human (with --diff and -v), --quiet, the
// JSON report, the lost-host line.
func TestNoLogHidesEverywhere(t *testing.T) {
	const secret = "S3cr3t-nolog-arg"
	plan := &module.Plan{
		Files:    []module.FileChange{{Action: module.Update, Path: "/etc/app/" + secret, Before: []byte("x = 1\n"), After: []byte("x = \"" + secret + "\"\n")}},
		Commands: []string{"login --pw " + secret},
		Notes:    []string{"note " + secret},
		Evidence: []module.Evidence{{What: "validate", Command: "check " + secret, OK: true, Output: secret}},
		Data:     []byte(`{"argv":["login","--pw","` + secret + `"]}`),
	}
	results := []*TaskResult{
		{Task: "t", Host: "h1", Status: Changed, NoLog: true, Plan: plan, Result: &module.Result{Changed: true, Output: "out " + secret}},
		{Task: "t", Host: "h2", Status: Failed, NoLog: true, Plan: plan, Msg: "login --pw " + secret + " exited 1\nrolled back this host's run: restored /etc/app/x", RolledBack: []string{"/etc/app/x"}},
		{Task: "t", Host: "h3", Status: Unreachable, NoLog: true, Msg: "timed out at step \"apply: run login --pw " + secret + "\""},
	}
	var human, quiet bytes.Buffer
	hu := &Human{W: &human, Diff: true, Verbose: true}
	q := &Quiet{Next: &Human{W: &quiet, Diff: true, Verbose: true}}
	r := NewRun("id", false)
	for _, o := range []Observer{hu, q} {
		o.PlayStart("p", []string{"h1", "h2", "h3"})
		o.TaskStart("t", false)
	}
	for _, tr := range results {
		r.Add(tr)
		hu.Result(tr)
		q.Result(tr)
	}
	hu.Done(r)
	q.Done(r)
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"human": human.String(), "quiet": quiet.String(), "json": js.String()} {
		if strings.Contains(out, secret) {
			t.Errorf("%s output shows the no_log task's secret:\n%s", name, out)
		}
		if !strings.Contains(out, "no_log") {
			t.Errorf("%s output does not say the output was hidden:\n%s", name, out)
		}
	}
	if !strings.Contains(human.String(), "diff hidden") || !strings.Contains(human.String(), "restored 1 file") {
		t.Errorf("human output should say the diff is hidden and that the host was rolled back:\n%s", human.String())
	}
	if !strings.Contains(js.String(), `"rolled_back"`) || !strings.Contains(js.String(), `"no_log": true`) {
		t.Errorf("JSON report lost rolled_back or no_log:\n%s", js.String())
	}
	// The run itself keeps the plan: a saved plan is made from it.
	if r.Results[0].Plan == nil || string(r.Results[0].Plan.Data) == "" {
		t.Error("Shown changed the run's own result")
	}
}

// TestSecretVarValuesMasked: the value of a secret-named variable is
// masked in every view, the JSON report's plan data included (it was
// stored there and in plan.commands), in whatever escaping.
func TestSecretVarValuesMasked(t *testing.T) {
	const secret = `pw"<S3cr3t-var>`
	redact.AddVars(map[string]any{"registry_password": secret})
	data, err := json.Marshal(map[string]any{"argv": []string{"login", "--password", secret}})
	if err != nil {
		t.Fatal(err)
	}
	plan := &module.Plan{Commands: []string{"login --password '" + secret + "'"}, Data: data}
	tr := &TaskResult{Task: "login", Host: "h1", Status: Failed, Plan: plan, Msg: fmt.Sprintf("run %q: exited 1", plan.Commands[0]),
		Result: &module.Result{Output: "using " + secret}}
	r := NewRun("id", false)
	r.Add(tr)
	var human, js bytes.Buffer
	hu := &Human{W: &human, Diff: true, Verbose: true}
	hu.Result(tr)
	hu.Done(r)
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"human": human.String(), "json": js.String()} {
		for _, form := range []string{"S3cr3t-var", `S3cr3t-var\u003e`} {
			if strings.Contains(out, form) {
				t.Errorf("%s output shows the secret variable's value:\n%s", name, out)
			}
		}
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("masked report is not JSON: %v\n%s", err, js.String())
	}
}

// A runtime's name is a node's text: with a control character, a quote, a
// backslash or a bidi override in it the textfile still parses with
// Prometheus' own parser, holds no raw control byte, and the label shows
// the character as a visible escape.
func TestPromHostileLabels(t *testing.T) {
	r := NewRun("id", true)
	name := "nv\x1b[2J\"q\\\u202e\nx"
	r.Add(&TaskResult{Host: "nuc1", Status: OK, Proofs: []module.Proof{{Kind: "runtime", Name: name, Status: module.ProofProved}}})
	var b bytes.Buffer
	if err := WriteProm(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, c := range b.String() {
		if c != '\n' && safetext.Unsafe(c) {
			t.Fatalf("raw %U in the textfile:\n%q", c, b.String())
		}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(&b)
	if err != nil {
		t.Fatalf("textfile does not parse: %v\n%s", err, b.String())
	}
	var got []string
	for _, m := range families["nodeconverge_runtime_proof"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "runtime" {
				got = append(got, l.GetValue())
			}
		}
	}
	if want := `nv\x1b[2J"q\\u202e\nx`; len(got) != 1 || got[0] != want {
		t.Errorf("runtime label %q, want %q", got, want)
	}
}
