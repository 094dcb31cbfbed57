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
	"nodeconverge/engine/savedplan"
)

type args struct {
	Dest string `json:"dest"`
}

func (args) Validate() error { return nil }

func change(a module.Action, path, from string, before, after []byte) module.FileChange {
	return module.FileChange{Action: a, Path: path, From: from, Before: before, After: after, BeforeHash: module.Hash(before), AfterHash: module.Hash(after)}
}

// samplePlan is a saved plan over two hosts of one play: n1 plans two
// steps (one a loop of two items) and a handler, n2 failed planning.
func samplePlan() *savedplan.Plan {
	sp := savedplan.New("20260101T000000Z-abcd", []string{"site.yaml"})
	sp.Plays = []savedplan.Play{{Name: "p", Hosts: []string{"n1", "n2"}, SerialCount: 1,
		Tasks:    []savedplan.Task{{Name: "write", Module: "copy", Notify: []string{"restart"}}, {Name: "lines", Module: "lineinfile", Loop: true}},
		Handlers: []savedplan.Task{{Name: "restart", Module: "containerd_restart"}}}}
	// Not valid UTF-8 and with a NUL: contents must survive JSON exactly.
	binary := []byte{0xff, 0x00, 0xfe, '\n'}
	write := savedplan.Step{Play: "p", Task: "write", Module: "copy", Notify: []string{"restart"}, Args: json.RawMessage(`{"dest":"/etc/a"}`)}
	write.SetPlan(&module.Plan{Files: []module.FileChange{
		change(module.Update, "/etc/a", "", []byte("old a\n"), binary),
		change(module.Create, "/etc/b", "", nil, []byte("b\n")),
	}}, nil)
	one := &module.Plan{Files: []module.FileChange{change(module.Update, "/etc/c", "", []byte("c\n"), []byte("c\nx\n"))}}
	two := &module.Plan{Files: []module.FileChange{change(module.Update, "/etc/c", "", []byte("c\nx\n"), []byte("c\nx\ny\n"))}}
	lines := savedplan.Step{Play: "p", TaskIndex: 1, Task: "lines", Module: "lineinfile", Args: json.RawMessage(`{"items":["x","y"]}`)}
	lines.SetPlan(&module.Plan{Files: append(append([]module.FileChange{}, one.Files...), two.Files...), Items: []*module.Plan{one, two}, ItemValues: []any{"x", "y"}},
		[]json.RawMessage{json.RawMessage(`{"line":"x"}`), json.RawMessage(`{"line":"y"}`)})
	restart := savedplan.Step{Play: "p", Task: "restart", Module: "containerd_restart", Handler: true, Because: []string{`"write" changed /etc/a`}}
	restart.SetPlan(&module.Plan{Restart: []string{"containerd"}}, nil)
	sp.Hosts = []savedplan.HostPlan{{Host: "n1", Steps: []savedplan.Step{write, lines, restart}}, {Host: "n2", Failed: `task "write": validate failed`}}
	return sp
}

func TestRoundTripKeepsContents(t *testing.T) {
	sp := samplePlan()
	if c := sp.Hosts[0].Steps[0].Contents; len(c) != 2 || string(c[0].Before) != "old a\n" {
		t.Fatalf("SetPlan kept contents %+v", c)
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
	// A loop's items keep their own contents, for the loop's Apply.
	if it := got.Hosts[0].Steps[1].Items; len(it) != 2 || string(it[1].Plan.Files[0].After) != "c\nx\ny\n" || string(it[1].Plan.Files[0].Before) != "c\nx\n" {
		t.Errorf("loop items after load: %+v", it)
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
	good := samplePlan()
	for name, edit := range map[string]func(m map[string]any){
		"wrong format":  func(m map[string]any) { m["format"] = "terraform-plan" },
		"wrong version": func(m map[string]any) { m["version"] = savedplan.Version + 1 },
		"contents missing": func(m map[string]any) {
			step := m["hosts"].([]any)[0].(map[string]any)["steps"].([]any)[0].(map[string]any)
			step["contents"] = step["contents"].([]any)[:1]
		},
		"item contents missing": func(m map[string]any) {
			item := m["hosts"].([]any)[0].(map[string]any)["steps"].([]any)[1].(map[string]any)["items"].([]any)[0].(map[string]any)
			item["contents"] = []any{}
		},
		"a step of no task": func(m map[string]any) {
			m["hosts"].([]any)[0].(map[string]any)["steps"].([]any)[1].(map[string]any)["task_index"] = 2
		},
		"a step of no play": func(m map[string]any) {
			m["hosts"].([]any)[0].(map[string]any)["steps"].([]any)[0].(map[string]any)["play_index"] = 1
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
	sp := samplePlan()
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
// needs (contents, data, arguments) and none of what is only shown.
func TestNoLogStepShowsNothing(t *testing.T) {
	const secret = "S3cr3t-saved"
	st := savedplan.Step{Play: "p", Task: "login", Module: "command", NoLog: true}
	st.SetPlan(&module.Plan{Commands: []string{"login --pw " + secret}, Notes: []string{secret}, Data: []byte(`{"argv":["login","--pw","` + secret + `"]}`),
		Evidence: []module.Evidence{{What: "w", Command: "c " + secret, Output: secret}}}, nil)
	if !st.NoLog || len(st.Plan.Commands) != 1 || !strings.Contains(string(st.Plan.Data), secret) {
		t.Fatalf("the step lost what applying needs: %+v", st)
	}
	st.Plan.Data = nil
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Fatalf("the saved plan shows a no_log step's secret outside its data:\n%s", b)
	}
}
