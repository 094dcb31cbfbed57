package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	"nodeconverge/engine/savedplan"
	_ "nodeconverge/modules/command"
	_ "nodeconverge/modules/shell"
)

// copyTask is a copy task writing content to the host's file name.
func copyTask(name, file, content string) string {
	return "    - name: " + name + "\n      copy:\n        dest: \"{{ dir }}/{{ inventory_hostname }}." + file + "\"\n        content: \"" + content + "\"\n"
}

// TestRefusedBeforeAnyWrite: a play whose first task would write and whose
// second would fail on the planned state writes nothing on that host, and
// says which task and why; the other host converges.
func TestRefusedBeforeAnyWrite(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	e.write("h1", "conf", "old\n")
	e.write("h2", "conf", "old\n")
	plays := e.load("- hosts: all\n  tasks:\n" + copyTask("write", "conf", "new\\n") + task("refuse", "t2", "fail_on: h1"))
	run := e.run(plays, e.options(false))
	if got, _ := e.read("h1", "conf"); got != "old\n" {
		t.Errorf("h1.conf = %q: the first task wrote although the second would fail", got)
	}
	if _, ok := e.read("h1", "t2"); ok {
		t.Error("h1.t2 was written")
	}
	var h1 []*report.TaskResult
	for _, tr := range run.Results {
		if tr.Host == "h1" {
			h1 = append(h1, tr)
		}
	}
	if len(h1) != 1 || h1[0].Task != "refuse" || h1[0].Status != report.Failed ||
		!strings.Contains(h1[0].Msg, `task "refuse"`) || !strings.Contains(h1[0].Msg, "fails on h1 by design") ||
		!strings.Contains(h1[0].Msg, "nothing was written on this host") {
		for _, tr := range h1 {
			t.Logf("%s %s: %s", tr.Task, tr.Status, tr.Msg)
		}
		t.Fatal("want one failed result for h1 naming task refuse and why, nothing written")
	}
	if got, _ := e.read("h2", "conf"); got != "new\n" {
		t.Errorf("h2.conf = %q, want the play applied on the other host", got)
	}
	if got, _ := e.read("h2", "t2"); got != "t2\n" {
		t.Errorf("h2.t2 = %q", got)
	}
	if code := run.ExitCode(); code != report.ExitFailed {
		t.Errorf("exit code %d, want %d", code, report.ExitFailed)
	}
}

// TestFailureAfterWriteRollsBack: a command that fails after two files
// were written (one changed, one created) undoes both, and the result says
// what was restored.
func TestFailureAfterWriteRollsBack(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "conf", "old\n")
	plays := e.load("- hosts: all\n  tasks:\n" + copyTask("change", "conf", "new\\n") + copyTask("create", "new", "x\\n") +
		"    - name: fails\n      shell:\n        cmd: \"echo boom >&2; exit 3\"\n" + copyTask("never", "never", "y\\n"))
	run := e.run(plays, e.options(false))
	if got, _ := e.read("h1", "conf"); got != "old\n" {
		t.Errorf("h1.conf = %q, want it restored", got)
	}
	for _, f := range []string{"new", "never"} {
		if _, ok := e.read("h1", f); ok {
			t.Errorf("h1.%s exists after the rollback", f)
		}
	}
	tr := results(t, run)["fails h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "boom") || !strings.Contains(tr.Msg, "rolled back this host's run") {
		t.Fatalf("fails h1 = %+v, want failed with the command's output and the rollback", tr)
	}
	want := []string{e.path("h1", "new"), e.path("h1", "conf")}
	if !slices.Equal(tr.RolledBack, want) {
		t.Errorf("rolled back %q, want %q", tr.RolledBack, want)
	}
	if _, ok := results(t, run)["never h1"]; ok {
		t.Error("a task ran after the failure")
	}
	if code := run.ExitCode(); code != report.ExitFailed {
		t.Errorf("exit code %d", code)
	}
}

// TestDidNotConvergeRollsBack: a re-check that still plans a change is a
// failure, and the write it judged never reaches the node: it waited for
// the host's next round trip (Host.Later), and the rollback dropped it. A
// write that did land before its re-check failed is undone (a command
// carried it here).
func TestDidNotConvergeRollsBack(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "t1", "before\n")
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1", `writes: "something else"`))
	run := e.run(plays, e.options(false))
	tr := results(t, run)["one h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "did not converge") ||
		!strings.Contains(tr.Msg, "rolled back this host's run: no file changes were left to undo") {
		t.Fatalf("one h1 = %+v", tr)
	}
	if got, _ := e.read("h1", "t1"); got != "before\n" {
		t.Errorf("h1.t1 = %q, want it never written", got)
	}

	// The same after a command carried the write to the node.
	e.write("h1", "t2", "before\n")
	plays = e.load("- hosts: all\n  tasks:\n" + copyTask("first", "t2", "new\\n") +
		"    - name: carrier\n      command:\n        cmd: \"true\"\n" + task("one", "t1", `writes: "something else"`))
	run = e.run(plays, e.options(false))
	tr = results(t, run)["one h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "did not converge") || !strings.Contains(tr.Msg, "restored "+e.path("h1", "t2")) {
		t.Fatalf("one h1 = %+v", tr)
	}
	if got, _ := e.read("h1", "t2"); got != "before\n" {
		t.Errorf("h1.t2 = %q, want it restored", got)
	}
	if got, _ := e.read("h1", "t1"); got != "before\n" {
		t.Errorf("h1.t1 = %q, want it restored", got)
	}
}

// TestPlannedAgainAfterCommand: a command's effect cannot be planned, so
// the tasks after it are planned again on the node as the command left it
// (here the command changes the file the next task manages).
func TestPlannedAgainAfterCommand(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "conf", "old\n")
	plays := e.load("- hosts: all\n  tasks:\n" +
		"    - name: edit\n      shell:\n        cmd: \"echo edited > {{ dir }}/{{ inventory_hostname }}.conf\"\n" +
		copyTask("manage", "conf", "new\\n"))
	run := e.run(plays, e.options(false))
	if code := run.ExitCode(); code != report.ExitOK {
		for _, tr := range run.Results {
			t.Logf("%s %s: %s", tr.Task, tr.Status, tr.Msg)
		}
		t.Fatalf("exit code %d", code)
	}
	tr := results(t, run)["manage h1"]
	if tr == nil || tr.Status != report.Changed || tr.Plan == nil || len(tr.Plan.Files) != 1 || string(tr.Plan.Files[0].Before) != "edited\n" {
		t.Fatalf("manage h1 = %+v, want a change planned from the command's result", tr)
	}
	if got, _ := e.read("h1", "conf"); got != "new\n" {
		t.Errorf("h1.conf = %q", got)
	}
}

// TestSavedPlanRelativeSrc: a saved plan of copy with a relative src
// re-checks against the file planning read (next to the playbook), not a
// path relative to wherever apply runs.
func TestSavedPlanRelativeSrc(t *testing.T) {
	e := newEnv(t, "h1")
	pbDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pbDir, "src.txt"), []byte("from src\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pb := filepath.Join(pbDir, "play.yaml")
	text := "- hosts: all\n  tasks:\n    - name: from src\n      copy:\n        dest: \"{{ dir }}/{{ inventory_hostname }}.src\"\n        src: src.txt\n"
	if err := os.WriteFile(pb, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	plays, err := playbook.Load(pb)
	if err != nil {
		t.Fatal(err)
	}
	check, sp := e.plan(plays, []string{pb})
	if code := check.ExitCode(); code != report.ExitDrift {
		t.Fatalf("check exit code %d", code)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := sp.Write(planFile); err != nil {
		t.Fatal(err)
	}
	loaded, err := savedplan.Load(planFile)
	if err != nil {
		t.Fatal(err)
	}
	run, err := runner.ApplySaved(context.Background(), e.inv, loaded, e.options(false))
	if err != nil {
		t.Fatal(err)
	}
	tr := results(t, run)["from src h1"]
	if tr == nil || tr.Status != report.Changed || run.ExitCode() != report.ExitOK {
		t.Fatalf("from src h1 = %+v, exit %d; want changed and re-checked clean", tr, run.ExitCode())
	}
	if got, _ := e.read("h1", "src"); got != "from src\n" {
		t.Errorf("h1.src = %q", got)
	}
}

// TestSavedPlanRollsBack: a saved plan goes through the same apply path: a
// step that fails after an earlier step wrote rolls the host back.
func TestSavedPlanRollsBack(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "conf", "old\n")
	plays := e.load("- hosts: all\n  tasks:\n" + copyTask("change", "conf", "new\\n") +
		"    - name: fails\n      shell:\n        cmd: \"exit 3\"\n")
	_, sp := e.plan(plays, nil)
	if n := len(sp.Hosts[0].Steps); n != 2 {
		t.Fatalf("saved %d steps, want the copy and the command", n)
	}
	run, err := runner.ApplySaved(context.Background(), e.inv, sp, e.options(false))
	if err != nil {
		t.Fatal(err)
	}
	tr := results(t, run)["fails h1"]
	if tr == nil || tr.Status != report.Failed || !slices.Equal(tr.RolledBack, []string{e.path("h1", "conf")}) {
		t.Fatalf("fails h1 = %+v, want failed with conf rolled back", tr)
	}
	if got, _ := e.read("h1", "conf"); got != "old\n" {
		t.Errorf("h1.conf = %q, want it restored", got)
	}
}

// TestRollbackOwesServedHandler: a handler that already ran on the new
// files is owed again once a later failure rolls the files back, so the
// next run restarts on the restored files.
func TestRollbackOwesServedHandler(t *testing.T) {
	e := newEnv(t, "h1")
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") + "      notify: [restart, gate]\n" +
		"  handlers:\n    - name: restart\n      test_restart: {}\n    - name: gate\n      test_restart_fail:\n        fail_on: h1\n")
	run := e.run(plays, e.options(false))
	res := results(t, run)
	if tr := res["restart h1"]; tr == nil || tr.Status != report.Changed {
		t.Fatalf("restart h1 = %+v, want it run", tr)
	}
	if tr := res["gate h1"]; tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "restored "+e.path("h1", "t1")) {
		t.Fatalf("gate h1 = %+v, want failed and rolled back", tr)
	}
	if _, ok := e.read("h1", "t1"); ok {
		t.Error("h1.t1 still there after the rollback")
	}
	for _, hn := range []string{"restart", "gate"} {
		if _, err := os.Stat(node.PendingPath(e.state, hn)); err != nil {
			t.Errorf("handler %s not owed after the rollback: %v", hn, err)
		}
	}
}

// TestSavedPlanChecksWhatItRead: a saved plan is refused on a host where a
// file its plan only read (a command's `creates:` marker here; a drop-in or
// the main config for containerd) changed since planning, and nothing is
// applied there: every file the plan was made from is fingerprinted, not
// only those it writes.
func TestSavedPlanChecksWhatItRead(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	e.write("h1", "conf", "old\n")
	e.write("h2", "conf", "old\n")
	plays := e.load("- hosts: all\n  tasks:\n" + copyTask("change", "conf", "new\\n") +
		"    - name: once\n      command:\n        cmd: \"touch {{ dir }}/{{ inventory_hostname }}.ran\"\n        creates: \"{{ dir }}/{{ inventory_hostname }}.marker\"\n")
	_, sp := e.plan(plays, nil)
	// Read, never written by the plan: the marker appears after planning.
	e.write("h1", "marker", "made after the plan\n")
	run, err := runner.ApplySaved(context.Background(), e.inv, sp, e.options(false))
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, run)
	tr := rs["verify fingerprints h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, e.path("h1", "marker")+" changed since the plan was made (planned from absent") {
		t.Fatalf("verify fingerprints h1 = %+v, want the host refused naming the marker", tr)
	}
	if got, _ := e.read("h1", "conf"); got != "old\n" {
		t.Errorf("h1.conf = %q: the refused host was written", got)
	}
	if _, ran := e.read("h1", "ran"); ran {
		t.Error("the command ran on the refused host")
	}
	if got, _ := e.read("h2", "conf"); got != "new\n" {
		t.Errorf("h2.conf = %q: the unchanged host was not applied", got)
	}
}

// TestQueuedWriteFailsAtTheEnd: a write no later round trip carried (a play
// without handlers or commands) is sent when the play ends on the host; one
// that fails there fails the host under its own heading, naming the task,
// and rolls the host back, the writes sent with it included. (One host:
// the test's hosts share one state directory, and so one run manifest.)
func TestQueuedWriteFailsAtTheEnd(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "t0", "before\n")
	// h1.t1 is a dangling symlink through a regular file: read as
	// missing, planned as a create, refused by the node when written.
	e.write("h1", "blocker", "x")
	if err := os.Symlink(e.path("h1", "blocker")+"/x", e.path("h1", "t1")); err != nil {
		t.Fatal(err)
	}
	plays := e.load("- hosts: all\n  tasks:\n" + task("zero", "t0") + task("one", "t1"))
	run := e.run(plays, e.options(false))
	res := results(t, run)
	if tr := res["zero h1"]; tr == nil || tr.Status != report.Changed {
		t.Errorf("zero h1 = %+v", tr)
	}
	tr := res["write the changes of earlier tasks h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, `a change of task "one"`) ||
		!strings.Contains(tr.Msg, "cannot resolve the symlink") || !slices.Equal(tr.RolledBack, []string{e.path("h1", "t0")}) {
		t.Fatalf("flush h1 = %+v", tr)
	}
	if got, _ := e.read("h1", "t0"); got != "before\n" {
		t.Errorf("h1.t0 = %q, want it restored", got)
	}
	if run.ExitCode() != report.ExitFailed {
		t.Errorf("exit code %d", run.ExitCode())
	}
}

// TestSavedPlanGoesInBatches (issue 27): a saved plan is applied by the
// play's batch loop: with serial 1 each host's tasks and its handler run
// before the next host is touched, and when a host's handler fails (under
// max_fail_percentage 0) that host is rolled back and the hosts of the
// later batches are not attempted, as in a live apply.
func TestSavedPlanGoesInBatches(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  serial: 1\n  max_fail_percentage: 0\n  tasks:\n" + task("one", "t1") + "      notify: restart\n" +
		"  handlers:\n    - name: restart\n      test_restart_fail:\n        fail_on: h2\n")
	_, sp := e.plan(plays, nil)
	if len(sp.Plays) != 1 || sp.Plays[0].SerialCount != 1 || sp.Plays[0].MaxFailPercentage == nil {
		t.Fatalf("saved plays %+v, want the play with its serial and max_fail_percentage", sp.Plays)
	}
	e.p.log = nil
	run, err := runner.ApplySaved(context.Background(), e.inv, sp, e.options(false))
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for _, l := range e.p.entries() {
		if strings.HasPrefix(l, "apply ") {
			applied = append(applied, l)
		}
	}
	want := []string{"apply " + e.path("h1", "t1") + " h1", "apply restart h1", "apply " + e.path("h2", "t1") + " h2", "apply restart h2"}
	if !slices.Equal(applied, want) {
		t.Fatalf("applied %q, want one host at a time, stopping after h2's failed handler: %q", applied, want)
	}
	// (The test's hosts share one state directory, so h2's rollback
	// restores h1's file too: h1 is judged by its results.)
	rs := results(t, run)
	if tr := rs["restart h1"]; tr == nil || tr.Status != report.Changed {
		t.Errorf("restart h1 = %+v, want the first host's handler run", tr)
	}
	if tr := rs["restart h2"]; tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "rolled back this host's run") {
		t.Errorf("restart h2 = %+v, want it failed and rolled back", tr)
	}
	if _, ok := e.read("h2", "t1"); ok {
		t.Error("h2.t1 still there: the failed handler's host was not rolled back")
	}
	if _, ok := e.read("h3", "t1"); ok {
		t.Error("h3 was written after the play stopped")
	}
	if why := run.NotAttempted["h3"]; !strings.Contains(why, "stopped in batch 2") {
		t.Errorf("h3 not attempted because %q, want the play stopped in batch 2", why)
	}
	if run.ExitCode() != report.ExitFailed {
		t.Errorf("exit code %d", run.ExitCode())
	}
}

// TestSavedPlanLoopAndHandler (issue 27): a plan with a loop task and a
// handler is saved, written, loaded and applied (every item, then the
// handler); a plan whose loop's file changed on a host since is refused
// there, nothing written, and applied on the other host.
func TestSavedPlanLoopAndHandler(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	e.write("h1", "a", "old\n")
	e.write("h2", "a", "old\n")
	plays := e.load(`- hosts: all
  tasks:
    - name: many
      copy:
        dest: "{{ dir }}/{{ inventory_hostname }}.{{ item }}"
        content: "{{ item }} new\n"
      loop: [a, b]
      notify: restart
  handlers:
    - name: restart
      test_restart: {}
`)
	save := func() *savedplan.Plan {
		_, sp := e.plan(plays, nil)
		f := filepath.Join(t.TempDir(), "plan.json")
		if err := sp.Write(f); err != nil {
			t.Fatal(err)
		}
		loaded, err := savedplan.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		return loaded
	}
	run, err := runner.ApplySaved(context.Background(), e.inv, save(), e.options(false))
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, run)
	for _, h := range []string{"h1", "h2"} {
		if tr := rs["many "+h]; tr == nil || tr.Status != report.Changed {
			t.Errorf("many %s = %+v, want changed and re-checked", h, tr)
		}
		if tr := rs["restart "+h]; tr == nil || tr.Status != report.Changed {
			t.Errorf("restart %s = %+v, want the handler run", h, tr)
		}
		for _, it := range []string{"a", "b"} {
			if got, _ := e.read(h, it); got != it+" new\n" {
				t.Errorf("%s.%s = %q", h, it, got)
			}
		}
	}
	if run.ExitCode() != report.ExitOK {
		t.Fatalf("exit code %d", run.ExitCode())
	}

	// A changed host is refused.
	e.write("h1", "a", "old\n")
	e.write("h2", "a", "old\n")
	sp := save()
	e.write("h1", "b", "edited after the plan\n")
	run, err = runner.ApplySaved(context.Background(), e.inv, sp, e.options(false))
	if err != nil {
		t.Fatal(err)
	}
	rs = results(t, run)
	if tr := rs["verify fingerprints h1"]; tr == nil || tr.Status != report.Failed || !tr.Refused ||
		!strings.Contains(tr.Msg, e.path("h1", "b")+" changed since the plan was made") {
		t.Fatalf("verify fingerprints h1 = %+v, want h1 refused naming its changed file", tr)
	}
	if got, _ := e.read("h1", "a"); got != "old\n" {
		t.Errorf("h1.a = %q: the refused host was written", got)
	}
	if got, _ := e.read("h2", "a"); got != "a new\n" {
		t.Errorf("h2.a = %q: the other host was not applied", got)
	}
}

// TestReadBackMismatchRollsBack (issue 27 item 4): when a play's queued
// writes travel, the node's hashes of them are read back in the same round
// trip; a node that does not hold what was written (a stand-in sha256sum,
// first on PATH, answers with another hash) fails the host under the step
// that carried them, naming the task, and rolls it back.
func TestReadBackMismatchRollsBack(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "t0", "before\n")
	plays := e.load("- hosts: all\n  tasks:\n" + task("zero", "t0"))
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "sha256sum"), []byte("#!/bin/sh\nshift\nfor f; do printf '%064d  %s\\n' 0 \"$f\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	run := e.run(plays, e.options(false))
	tr := results(t, run)["write the changes of earlier tasks h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "the node does not hold what was written") ||
		!strings.Contains(tr.Msg, `a change of task "zero"`) || !slices.Equal(tr.RolledBack, []string{e.path("h1", "t0")}) {
		t.Fatalf("flush h1 = %+v, want the read-back's difference and the rollback", tr)
	}
	if got, _ := e.read("h1", "t0"); got != "before\n" {
		t.Errorf("h1.t0 = %q, want it restored", got)
	}
}
