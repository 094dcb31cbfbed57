package report

import (
	"bytes"
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

func TestSanitize(t *testing.T) {
	if got := sanitize("\x1b[31mred\x1b[0m\r\nok\tx"); got != "red\nok\tx" {
		t.Fatalf("sanitize = %q", got)
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
