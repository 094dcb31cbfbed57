package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nodeconverge/engine/node"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	_ "nodeconverge/modules/copy"
)

func TestLinearOrder(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") + task("two", "t2"))
	run := e.run(plays, e.options(false))
	if code := run.ExitCode(); code != report.ExitOK {
		t.Fatalf("exit code %d, errors %v", code, run.Errors)
	}
	// Every host plans the whole play first (checks only); from the first
	// write on, the hosts go task by task.
	log := e.p.entries()
	if i := slices.IndexFunc(log, func(l string) bool { return strings.HasPrefix(l, "apply ") }); i >= 0 {
		for _, l := range log[:i] {
			if !strings.HasPrefix(l, "check ") {
				t.Errorf("%q before the first apply: planning only checks", l)
			}
		}
		log = log[i:]
	}
	lastT1, firstT2 := -1, len(log)
	for i, l := range log {
		if strings.Contains(l, ".t1 ") || strings.HasPrefix(l, "check t1 ") {
			lastT1 = i
		}
		if (strings.Contains(l, ".t2 ") || strings.HasPrefix(l, "check t2 ")) && i < firstT2 {
			firstT2 = i
		}
	}
	if lastT1 > firstT2 {
		t.Errorf("task two started before every host finished task one:\n%s", strings.Join(log, "\n"))
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		for _, n := range []string{"t1", "t2"} {
			if got, _ := e.read(h, n); got != n+"\n" {
				t.Errorf("%s %s = %q, want %q", h, n, got, n+"\n")
			}
		}
	}
	if e.dials.Load() != 3 {
		t.Errorf("dialled %d times, want once per host (3)", e.dials.Load())
	}
	// The node lock is released when the run ends.
	if ents, err := os.ReadDir(filepath.Join(e.state, "lock.d")); err != nil || len(ents) != 0 {
		t.Errorf("lock.d after the run: %v entries, err %v", len(ents), err)
	}
}

func TestForksBoundConcurrentChecks(t *testing.T) {
	hosts := []string{"h1", "h2", "h3", "h4", "h5"}
	e := newEnv(t, hosts...)
	e.p.gate, e.p.gateHosts = 2, len(hosts)
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1"))
	o := e.options(true)
	o.Forks = 2
	run := e.run(plays, o)
	if e.p.maxInFlight != 2 {
		t.Errorf("at most %d Checks ran at once, want exactly forks (2)", e.p.maxInFlight)
	}
	if n := len(run.Results); n != len(hosts) {
		t.Errorf("%d results, want %d", n, len(hosts))
	}
}

func TestSerialPercentBatches(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	// 50% of 3 hosts rounds down to batches of one host.
	plays := e.load("- hosts: all\n  serial: \"50%\"\n  tasks:\n" + task("one", "t1") + task("two", "t2"))
	e.run(plays, e.options(false))
	var checks []string
	for _, en := range e.p.entries() {
		if strings.HasPrefix(en, "check ") && !slices.Contains(checks, en) {
			checks = append(checks, en)
		}
	}
	want := []string{"check t1 h1", "check t2 h1", "check t1 h2", "check t2 h2", "check t1 h3", "check t2 h3"}
	if !slices.Equal(checks, want) {
		t.Errorf("order = %q, want %q", checks, want)
	}
}

// TestCheckModeIgnoresSerial: a drift run changes nothing, so it plans
// every host of a serial play at once, in linear order.
func TestCheckModeIgnoresSerial(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  serial: 1\n  tasks:\n" + task("one", "t1") + task("two", "t2"))
	e.run(plays, e.options(true))
	got := e.p.entries()
	if len(got) != 6 {
		t.Fatalf("entries %q", got)
	}
	for i, en := range got {
		want := "check t1 "
		if i >= 3 {
			want = "check t2 "
		}
		if !strings.HasPrefix(en, want) {
			t.Errorf("entry %d = %q: every host should finish t1 before any starts t2", i, en)
		}
	}
}

func TestFailedBatchStopsBeforeNextBatch(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  serial: 1\n  tasks:\n" + task("one", "t1", "fail_on: h1") + task("two", "t2"))
	run := e.run(plays, e.options(false))
	if got, want := e.p.entries(), []string{"check t1 h1"}; !slices.Equal(got, want) {
		t.Errorf("touched %q, want only %q", got, want)
	}
	if len(run.Errors) != 1 || !strings.Contains(run.Errors[0], "every host of batch 1 failed") {
		t.Errorf("errors = %q", run.Errors)
	}
	if e.dials.Load() != 1 {
		t.Errorf("dialled %d hosts, want 1", e.dials.Load())
	}
	if run.ExitCode() != report.ExitFailed {
		t.Errorf("exit code %d, want %d", run.ExitCode(), report.ExitFailed)
	}
}

func TestMaxFailPercentage(t *testing.T) {
	hosts := []string{"h1", "h2", "h3", "h4"}
	t.Run("above stops the play", func(t *testing.T) {
		e := newEnv(t, hosts...)
		plays := e.load("- hosts: all\n  max_fail_percentage: 25\n  tasks:\n" + task("one", "t1", "fail_on: h1,h2") + task("two", "t2"))
		run := e.run(plays, e.options(false))
		// The failures show while planning, before the first write: no
		// host of the batch is written.
		if len(e.p.applies) != 0 {
			t.Errorf("applied %v after 2 of 4 hosts failed to plan", e.p.applies)
		}
		if len(run.Errors) != 1 || !strings.Contains(run.Errors[0], "2 of 4 hosts failed (50%), above max_fail_percentage 25") {
			t.Errorf("errors = %q", run.Errors)
		}
	})
	t.Run("at the limit goes on", func(t *testing.T) {
		e := newEnv(t, hosts...)
		plays := e.load("- hosts: all\n  max_fail_percentage: 25\n  tasks:\n" + task("one", "t1", "fail_on: h1") + task("two", "t2"))
		run := e.run(plays, e.options(false))
		res := results(t, run)
		if len(run.Errors) != 0 {
			t.Errorf("errors = %q, want none at exactly 25%%", run.Errors)
		}
		if _, ok := res["two h1"]; ok {
			t.Error("task two ran on the failed host h1")
		}
		for _, h := range hosts[1:] {
			if tr := res["two "+h]; tr == nil || tr.Status != report.Changed {
				t.Errorf("two %s = %+v, want changed", h, tr)
			}
		}
		if run.ExitCode() != report.ExitFailed {
			t.Errorf("exit code %d, want %d", run.ExitCode(), report.ExitFailed)
		}
	})
}

const handlers = "  handlers:\n    - name: restart\n      test_restart: {}\n"

func TestHandlersRunOnceWhereNotified(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	// h2 already holds both files: its notifying tasks change nothing.
	e.write("h2", "t1", "t1\n")
	e.write("h2", "t2", "t2\n")
	// h3 needs only the second file.
	e.write("h3", "t1", "t1\n")
	// The hosts share this machine and so one state directory: a first
	// task that notifies nothing makes every host read the pending records
	// (at its first task) before any host records one, as on real nodes.
	plays := e.load("- hosts: all\n  tasks:\n" + task("zero", "t0") +
		task("one", "t1") + "      notify: restart\n" +
		task("two", "t2") + "      notify: [restart]\n" +
		task("three", "t3") + handlers)
	run := e.run(plays, e.options(false))
	if code := run.ExitCode(); code != report.ExitOK {
		t.Fatalf("exit code %d, errors %v", code, run.Errors)
	}
	if want := map[string]int{"h1": 1, "h3": 1}; fmt.Sprint(e.p.restarts) != fmt.Sprint(want) {
		t.Errorf("restarts = %v, want %v", e.p.restarts, want)
	}
	res := results(t, run)
	h1 := res["restart h1"]
	if h1 == nil || !h1.Handler || len(h1.Because) != 2 {
		t.Fatalf("restart on h1 = %+v, want a handler because of two tasks", h1)
	}
	if !strings.Contains(h1.Because[0], `"one" changed`) || !strings.Contains(h1.Because[1], `"two" changed`) {
		t.Errorf("because = %q", h1.Because)
	}
	if h3 := res["restart h3"]; h3 == nil || len(h3.Because) != 1 || !strings.Contains(h3.Because[0], `"two" changed`) {
		t.Errorf("restart on h3 = %+v", h3)
	}
	// Handlers flush at the end of the batch: after the last task.
	log := e.p.entries()
	firstRestart := slices.IndexFunc(log, func(s string) bool { return strings.Contains(s, "restart") })
	lastT3 := -1
	for i, l := range log {
		if strings.Contains(l, "t3") {
			lastT3 = i
		}
	}
	if firstRestart < lastT3 {
		t.Errorf("a handler ran before the last task finished:\n%s", strings.Join(log, "\n"))
	}
	if _, err := os.Stat(node.PendingPath(e.state, "restart")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pending record left after the handler ran: %v", err)
	}
}

func TestHandlersRollBatchByBatch(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	plays := e.load("- hosts: all\n  serial: 1\n  tasks:\n" + task("one", "t1") + "      notify: restart\n" + handlers)
	e.run(plays, e.options(false))
	want := []string{
		"check t1 h1", "apply " + e.path("h1", "t1") + " h1", "check t1 h1", "check restart h1", "apply restart h1",
		"check t1 h2", "apply " + e.path("h2", "t1") + " h2", "check t1 h2", "check restart h2", "apply restart h2",
	}
	if got := e.p.entries(); !slices.Equal(got, want) {
		t.Errorf("order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFailedHandlerStopsSerialRollout(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  serial: 1\n  max_fail_percentage: 0\n  tasks:\n" + task("one", "t1") + "      notify: restart\n" +
		"  handlers:\n    - name: restart\n      test_restart_fail:\n        fail_on: h1\n")
	run := e.run(plays, e.options(false))
	for _, l := range e.p.entries() {
		if strings.HasSuffix(l, " h2") || strings.HasSuffix(l, " h3") {
			t.Errorf("the next batch was touched after a failed restart: %s", l)
		}
	}
	res := results(t, run)
	if tr := res["restart h1"]; tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "health gates") {
		t.Errorf("restart h1 = %+v, want failed", tr)
	}
	if len(run.Errors) != 1 || !strings.Contains(run.Errors[0], "max_fail_percentage 0") {
		t.Errorf("errors = %q", run.Errors)
	}
	if _, ok := e.read("h2", "t1"); ok {
		t.Error("h2 was written")
	}
	// The failed handler leaves its record: the next run owes it.
	if _, err := os.Stat(node.PendingPath(e.state, "restart")); err != nil {
		t.Errorf("pending record after a failed handler: %v", err)
	}
	if run.ExitCode() != report.ExitFailed {
		t.Errorf("exit code %d", run.ExitCode())
	}
}

func TestCheckModeNeverApplies(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") + "      notify: restart\n" + handlers)
	run := e.run(plays, e.options(true))
	if len(e.p.applies) != 0 || len(e.p.restarts) != 0 {
		t.Errorf("check mode called Apply: files %v, restarts %v", e.p.applies, e.p.restarts)
	}
	for _, h := range []string{"h1", "h2"} {
		if _, ok := e.read(h, "t1"); ok {
			t.Errorf("check mode wrote %s", e.path(h, "t1"))
		}
	}
	// Check mode records nothing: no lock, pending record or backup. The
	// scripts' private directories live in StateDir/tmp (issue 11 item
	// 7), so that may exist, and empty once the run is over.
	if es, err := os.ReadDir(e.state); err == nil {
		for _, de := range es {
			if de.Name() != node.ScratchDirName {
				t.Errorf("check mode created %s in the state dir", de.Name())
			}
		}
		if left, err := os.ReadDir(filepath.Join(e.state, node.ScratchDirName)); err != nil || len(left) != 0 {
			t.Errorf("left in %s/%s after a check run: %v, %v", e.state, node.ScratchDirName, left, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	res := results(t, run)
	if tr := res["one h1"]; tr == nil || tr.Status != report.Changed {
		t.Errorf("one h1 = %+v, want changed", tr)
	}
	if tr := res["restart h1"]; tr == nil || tr.Status != report.Skipped {
		t.Errorf("restart h1 = %+v, want skipped", tr)
	}
	if code := run.ExitCode(); code != report.ExitDrift {
		t.Errorf("exit code with changes = %d, want %d", code, report.ExitDrift)
	}

	// Once applied, check mode finds nothing to do.
	if code := e.run(plays, e.options(false)).ExitCode(); code != report.ExitOK {
		t.Fatalf("apply exit code %d", code)
	}
	applies := fmt.Sprint(e.p.applies)
	run = e.run(plays, e.options(true))
	if code := run.ExitCode(); code != report.ExitOK {
		t.Errorf("exit code without changes = %d, want %d", code, report.ExitOK)
	}
	if fmt.Sprint(e.p.applies) != applies {
		t.Errorf("check mode applied: %v, was %v", e.p.applies, applies)
	}
}

func TestCheckModeSeesEarlierPlannedWrites(t *testing.T) {
	e := newEnv(t, "h1")
	// Both tasks manage the same file with the same content: after the
	// first plans the write, the second must see it and plan nothing.
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") + task("again", "t1"))
	res := results(t, e.run(plays, e.options(true)))
	if res["one h1"].Status != report.Changed || res["again h1"].Status != report.OK {
		t.Errorf("one = %s, again = %s; want changed, ok", res["one h1"].Status, res["again h1"].Status)
	}
}

func TestDidNotConverge(t *testing.T) {
	e := newEnv(t, "h1")
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1", `writes: "something else"`) + task("two", "t2"))
	run := e.run(plays, e.options(false))
	res := results(t, run)
	tr := res["one h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "did not converge") || !strings.Contains(tr.Msg, "update "+e.path("h1", "t1")) {
		t.Fatalf("one h1 = %+v, want failed: did not converge", tr)
	}
	if _, ok := res["two h1"]; ok {
		t.Error("task two ran on a host that failed")
	}
	if run.ExitCode() != report.ExitFailed {
		t.Errorf("exit code %d", run.ExitCode())
	}
}

func TestPreflightFailsBeforeDial(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") +
		"    - name: typo\n      test_file:\n        path: \"{{ dir }}/x\"\n        content: \"{{ no_such_var }}\"\n        label: typo\n")
	_, err := runner.Run(context.Background(), e.inv, plays, e.options(false))
	if err == nil || !strings.Contains(err.Error(), `undefined variable "no_such_var"`) || !strings.Contains(err.Error(), "play.yaml:") {
		t.Fatalf("err = %v, want an undefined variable with its position", err)
	}
	// Both hosts are named: preflight collects every error.
	if !strings.Contains(err.Error(), "host h1") || !strings.Contains(err.Error(), "host h2") {
		t.Errorf("err = %v, want both hosts", err)
	}
	if e.dials.Load() != 0 {
		t.Errorf("dialled %d times before preflight passed", e.dials.Load())
	}
	if _, ok := e.read("h1", "t1"); ok {
		t.Error("the first task ran although a later one could not render")
	}
}

func TestUnreachableHostLeavesOthersGoing(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	e.unreachable["h2"] = true
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") + task("two", "t2"))
	run := e.run(plays, e.options(false))
	res := results(t, run)
	if tr := res["one h2"]; tr == nil || tr.Status != report.Unreachable || !strings.Contains(tr.Msg, "no route to host") {
		t.Errorf("one h2 = %+v, want unreachable", tr)
	}
	if _, ok := res["two h2"]; ok {
		t.Error("task two ran on the unreachable host")
	}
	for _, h := range []string{"h1", "h3"} {
		if tr := res["two "+h]; tr == nil || tr.Status != report.Changed {
			t.Errorf("two %s = %+v, want changed", h, tr)
		}
	}
	if e.dials.Load() != 3 {
		t.Errorf("dialled %d times, want 3", e.dials.Load())
	}
	if code := run.ExitCode(); code != report.ExitUnreachable {
		t.Errorf("exit code %d, want %d", code, report.ExitUnreachable)
	}
}

func TestOwedHandlerRunsAndClears(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "t1", "t1\n") // the task has nothing to do
	old := node.NewHost(localconn.New("h1"), node.HostOptions{StateDir: e.state, RunID: "20250101T000000Z-dead"})
	op, err := node.PendingOp(e.state, node.PendingRecord{Handler: "restart", RunID: "20250101T000000Z-dead", Files: []string{"/etc/x.toml"}, Since: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Apply(context.Background(), []transport.Op{op}); err != nil {
		t.Fatal(err)
	}
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") + "      notify: restart\n" + handlers)
	run := e.run(plays, e.options(false))
	res := results(t, run)
	if tr := res["one h1"]; tr == nil || tr.Status != report.OK {
		t.Errorf("one h1 = %+v, want ok", tr)
	}
	tr := res["restart h1"]
	if tr == nil || tr.Status != report.Changed || len(tr.Because) != 1 || !strings.Contains(tr.Because[0], "owed since run 20250101T000000Z-dead changed /etc/x.toml") {
		t.Fatalf("restart h1 = %+v, want run because it was owed", tr)
	}
	if e.p.restarts["h1"] != 1 {
		t.Errorf("restarts = %v", e.p.restarts)
	}
	if _, err := os.Stat(node.PendingPath(e.state, "restart")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pending record after the owed handler ran: %v", err)
	}
	// Nothing is owed any more.
	run = e.run(plays, e.options(false))
	if _, ok := results(t, run)["restart h1"]; ok || e.p.restarts["h1"] != 1 {
		t.Errorf("the handler ran again: restarts %v", e.p.restarts)
	}
}

// Check mode reports what apply does: a task that an earlier task's
// planned write makes unnecessary is ok in both, down to the file's mode.
func TestCheckAgreesWithApply(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "conf", "old\n")
	if err := os.Chmod(e.path("h1", "conf"), 0o644); err != nil {
		t.Fatal(err)
	}
	plays := e.load("- hosts: all\n  tasks:\n" +
		"    - name: content\n      copy:\n        dest: \"{{ dir }}/{{ inventory_hostname }}.conf\"\n        content: \"new\\n\"\n" +
		"    - name: content and mode\n      copy:\n        dest: \"{{ dir }}/{{ inventory_hostname }}.conf\"\n        content: \"new\\n\"\n        mode: \"0644\"\n")
	status := func(run *report.Run) string {
		var out []string
		for _, tr := range run.Results {
			out = append(out, tr.Task+"="+string(tr.Status))
		}
		return strings.Join(out, " ")
	}
	check := e.run(plays, e.options(true))
	apply := e.run(plays, e.options(false))
	if status(check) != status(apply) || status(apply) != "content=changed content and mode=ok" {
		t.Errorf("check: %s\napply: %s\nwant both: content=changed content and mode=ok", status(check), status(apply))
	}
}
