package savedplan_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/engine/module"
	"nodeconverge/engine/report"
	"nodeconverge/engine/savedplan"
)

type args struct {
	Dest string `json:"dest"`
}

func (args) Validate() error { return nil }

func change(a module.Action, path, from string, before, after []byte) module.FileChange {
	return module.FileChange{Action: a, Path: path, From: from, Before: before, After: after, BeforeHash: module.Hash(before), AfterHash: module.Hash(after)}
}

// checkRun is a check-mode run over two hosts: n1 plans two steps and a
// handler, n2 fails planning.
func checkRun() *report.Run {
	r := report.NewRun("20260101T000000Z-abcd", true)
	// Not valid UTF-8 and with a NUL: contents must survive JSON exactly.
	binary := []byte{0xff, 0x00, 0xfe, '\n'}
	r.Touch("n1")
	r.Touch("n2")
	r.Add(&report.TaskResult{Play: "p", Task: "write", Module: "copy", Host: "n1", Status: report.Changed,
		Args: args{Dest: "/etc/a"}, Notify: []string{"restart"},
		Plan: &module.Plan{Files: []module.FileChange{
			change(module.Update, "/etc/a", "", []byte("old a\n"), binary),
			change(module.Create, "/etc/b", "", nil, []byte("b\n")),
		}}})
	r.Add(&report.TaskResult{Play: "p", Task: "same", Module: "copy", Host: "n1", Status: report.OK, Plan: &module.Plan{}})
	r.Add(&report.TaskResult{Play: "p", Task: "restart", Module: "containerd_restart", Host: "n1", Status: report.Skipped, Handler: true,
		Because: []string{`"write" changed /etc/a`}, Plan: &module.Plan{Restart: []string{"containerd"}}})
	r.Add(&report.TaskResult{Play: "p", Task: "write", Module: "copy", Host: "n2", Status: report.Failed, Msg: "validate failed"})
	return r
}

func TestRoundTripKeepsContents(t *testing.T) {
	sp, err := savedplan.FromRun(checkRun(), []string{"site.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Hosts) != 2 || sp.Hosts[0].Host != "n1" || sp.Hosts[1].Host != "n2" {
		t.Fatalf("hosts = %+v", sp.Hosts)
	}
	n1, n2 := sp.Hosts[0], sp.Hosts[1]
	if len(n1.Steps) != 2 || n1.Steps[0].Task != "write" || !n1.Steps[1].Handler {
		t.Fatalf("n1 steps = %+v, want the write and the handler (the ok task has no step)", n1.Steps)
	}
	if !strings.Contains(n2.Failed, "validate failed") || len(n2.Steps) != 0 {
		t.Errorf("n2 = %+v, want failed with no steps", n2)
	}
	if string(n1.Steps[0].Args) != `{"dest":"/etc/a"}` {
		t.Errorf("args = %s", n1.Steps[0].Args)
	}

	path := filepath.Join(t.TempDir(), "plan.json")
	if err := sp.Write(path); err != nil {
		t.Fatal(err)
	}
	if !savedplan.IsPlanFile(path) {
		t.Error("IsPlanFile says the written plan is not one")
	}
	got, err := savedplan.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// Write indents the args JSON; only its meaning must survive.
	compact := cmp.Transformer("compact", func(r json.RawMessage) string {
		var b bytes.Buffer
		if err := json.Compact(&b, r); err != nil {
			return "invalid: " + err.Error()
		}
		return b.String()
	})
	if diff := cmp.Diff(sp, got, compact); diff != "" {
		t.Errorf("round trip (-wrote +loaded):\n%s", diff)
	}
	// cmp compares the exported fields, Before/After included; say it
	// outright for the bytes that matter most.
	if f := got.Hosts[0].Steps[0].Plan.Files[0]; !bytes.Equal(f.After, []byte{0xff, 0x00, 0xfe, '\n'}) || string(f.Before) != "old a\n" {
		t.Errorf("contents after load: before %q after %q", f.Before, f.After)
	}
}

func TestFromRunRefusesAnApplyRun(t *testing.T) {
	if _, err := savedplan.FromRun(report.NewRun("x", false), nil); err == nil {
		t.Error("FromRun accepted an apply run")
	}
}

func TestFingerprintsFirstStepSpeaks(t *testing.T) {
	hp := savedplan.HostPlan{Host: "n1", Steps: []savedplan.Step{
		{Plan: module.Plan{Files: []module.FileChange{
			change(module.Update, "/a", "", []byte("a live"), []byte("a1")),
			change(module.Create, "/b", "", nil, []byte("b1")),
			change(module.Move, "/dest/c", "/c", []byte("c live"), []byte("c live")),
			change(module.Delete, "/d", "", []byte("d live"), nil),
		}}},
		{Plan: module.Plan{Files: []module.FileChange{
			// Later steps see earlier plans, not the live node.
			change(module.Update, "/a", "", []byte("a1"), []byte("a2")),
			change(module.Update, "/b", "", []byte("b1"), []byte("b2")),
			change(module.Create, "/c", "", nil, []byte("new c")),
		}}},
	}}
	// A create carries no BeforeHash; make sure Fingerprints does not rely
	// on the module having left it empty.
	hp.Steps[0].Plan.Files[1].BeforeHash = "not-the-live-hash"
	want := map[string]string{
		"/a":      module.Hash([]byte("a live")),
		"/b":      "",
		"/c":      module.Hash([]byte("c live")),
		"/dest/c": "",
		"/d":      module.Hash([]byte("d live")),
	}
	if diff := cmp.Diff(want, hp.Fingerprints()); diff != "" {
		t.Errorf("fingerprints (-want +got):\n%s", diff)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	good, err := savedplan.FromRun(checkRun(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(m map[string]any){
		"wrong format":  func(m map[string]any) { m["format"] = "terraform-plan" },
		"wrong version": func(m map[string]any) { m["version"] = savedplan.Version + 1 },
		"contents missing": func(m map[string]any) {
			step := m["hosts"].([]any)[0].(map[string]any)["steps"].([]any)[0].(map[string]any)
			step["contents"] = step["contents"].([]any)[:1]
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(good)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := savedplan.Load(p); err == nil {
				t.Errorf("Load accepted a plan with %s", name)
			}
		})
	}
	p := filepath.Join(dir, "playbook.yaml")
	if err := os.WriteFile(p, []byte("- hosts: all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := savedplan.Load(p); err == nil {
		t.Error("Load accepted a playbook")
	}
	if savedplan.IsPlanFile(p) {
		t.Error("IsPlanFile says a playbook is a plan")
	}
}

func TestWriteIsOwnerOnly(t *testing.T) {
	sp, err := savedplan.FromRun(checkRun(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.json")
	// An earlier, world-readable file at the path must not keep its mode:
	// the plan holds file contents (registry credentials, say).
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fresh, old} {
		if err := sp.Write(p); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", filepath.Base(p), fi.Mode())
		}
		if _, err := savedplan.Load(p); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}

// TestNoLogStepShowsNothing: a no_log step keeps in the file what applying
// needs (contents, data, arguments) and none of what is only shown; a
// host whose no_log task failed planning does not have its message saved.
func TestNoLogStepShowsNothing(t *testing.T) {
	const secret = "S3cr3t-saved"
	r := report.NewRun("20260101T000000Z-abcd", true)
	r.Add(&report.TaskResult{Play: "p", Task: "login", Module: "command", Host: "n1", Status: report.Skipped, NoLog: true,
		Plan: &module.Plan{Commands: []string{"login --pw " + secret}, Notes: []string{secret}, Data: []byte(`{"argv":["login","--pw","` + secret + `"]}`),
			Evidence: []module.Evidence{{What: "w", Command: "c " + secret, Output: secret}}}})
	r.Add(&report.TaskResult{Play: "p", Task: "login", Module: "command", Host: "n2", Status: report.Failed, NoLog: true, Msg: "failed: " + secret})
	sp, err := savedplan.FromRun(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := sp.Hosts[0].Steps[0]
	if !st.NoLog || len(st.Plan.Commands) != 1 || !strings.Contains(string(st.Plan.Data), secret) {
		t.Fatalf("the step lost what applying needs: %+v", st)
	}
	st.Plan.Data = nil
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) || strings.Contains(sp.Hosts[1].Failed, secret) {
		t.Fatalf("the saved plan shows a no_log step's secret outside its data:\n%s\n%s", b, sp.Hosts[1].Failed)
	}
}

// TestInterruptedRunIsNotSaved: a check run stopped by a signal planned
// some hosts part way; its plan is refused, not saved incomplete.
func TestInterruptedRunIsNotSaved(t *testing.T) {
	r := checkRun()
	r.Interrupt("n1", "nothing in flight; left as its last finished task left it")
	if _, err := savedplan.FromRun(r, nil); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("FromRun of an interrupted run = %v, want a refusal", err)
	}
}
