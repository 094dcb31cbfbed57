package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
	_ "nodeconverge/modules/command"
)

// test_hang's Check runs `sleep <nap>` on the host as a read-only query,
// like a containerd `config dump` that hangs on one node.
func init() { module.Register(module.Registration{Name: "test_hang", Module: hangModule{}}) }

type hangArgs struct {
	Nap string `yaml:"nap"`
}

func (*hangArgs) Validate() error { return nil }

type hangModule struct{}

func (hangModule) NewArgs() module.Args { return &hangArgs{} }

func (hangModule) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*hangArgs)
	if _, err := h.Query(ctx, transport.Query{Cmds: []transport.Cmd{{Argv: []string{"sleep", a.Nap}}}}); err != nil {
		return nil, err
	}
	return &module.Plan{}, nil
}

func (hangModule) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}

// napEnv is an env whose host h1 naps 600 s (hangs, as far as a run is
// concerned) and the others not at all.
func napEnv(t *testing.T) *env {
	e := newEnv(t, "h1", "h2", "h3")
	inv := "all:\n  hosts:\n    h1:\n      nap: 600\n    h2:\n      nap: 0\n    h3:\n      nap: 0\n"
	p := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(p, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.inv, err = inventory.Load(p); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestTaskTimeoutFailsOnlyTheHungHost: a command that hangs on one host is
// ended at the task's timeout; that host fails saying where it was, the
// others run the next task, and the run ends within the timeout plus the
// grace for ending the remote command.
func TestTaskTimeoutFailsOnlyTheHungHost(t *testing.T) {
	e := napEnv(t)
	plays := e.load("- hosts: all\n  tasks:\n    - name: nap\n      timeout: 10\n      command:\n        cmd: \"sleep {{ nap }}\"\n" + task("two", "t2"))
	start := time.Now()
	run := e.run(plays, e.options(false))
	// The timeouts are long enough for the healthy hosts' `sleep 0` on a
	// loaded machine; the bound is what shows the hung host was ended.
	if took := time.Since(start); took > 90*time.Second {
		t.Fatalf("run took %s with a 10 s task timeout", took)
	}
	res := results(t, run)
	tr := res["nap h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, `timed out after 10s in task "nap" at step "apply: run sleep 600"`) {
		t.Fatalf("nap h1 = %+v, want failed by its timeout", tr)
	}
	if _, ok := res["two h1"]; ok {
		t.Error("task two ran on the timed-out host")
	}
	for _, h := range []string{"h2", "h3"} {
		if tr := res["two "+h]; tr == nil || tr.Status != report.Changed {
			t.Errorf("two %s = %+v, want changed", h, tr)
		}
	}
	if run.ExitCode() != report.ExitFailed {
		t.Errorf("exit code %d, want %d", run.ExitCode(), report.ExitFailed)
	}
}

// TestCheckModeTimeoutFromOptions: in check mode a read that hangs on one
// host is bounded by the run's timeout (the --timeout flag) when the task
// sets none.
func TestCheckModeTimeoutFromOptions(t *testing.T) {
	e := napEnv(t)
	plays := e.load("- hosts: all\n  tasks:\n    - name: dump\n      test_hang:\n        nap: \"{{ nap }}\"\n" + task("two", "t2"))
	o := e.options(true)
	o.Timeout = 10 * time.Second
	start := time.Now()
	run := e.run(plays, o)
	if took := time.Since(start); took > 90*time.Second {
		t.Fatalf("run took %s with a 10 s timeout", took)
	}
	res := results(t, run)
	if tr := res["dump h1"]; tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, `timed out after 10s in task "dump" at step "check"`) {
		t.Fatalf("dump h1 = %+v, want failed by the timeout", tr)
	}
	for _, h := range []string{"h2", "h3"} {
		if tr := res["two "+h]; tr == nil || tr.Status != report.Changed {
			t.Errorf("two %s = %+v, want changed (planned); dump: %+v", h, tr, res["dump "+h])
		}
	}
}

// TestUnreachableFirstHostDoesNotStopSerialPlay: with serial 1 and
// max_fail_percentage 0, a first host that cannot be reached (nothing was
// written to it) does not stop the play: the others converge, the run
// exits 4, and the recap says why the host took no part.
func TestUnreachableFirstHostDoesNotStopSerialPlay(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	e.unreachable["h1"] = true
	plays := e.load("- hosts: all\n  serial: 1\n  max_fail_percentage: 0\n  tasks:\n" + task("one", "t1"))
	run := e.run(plays, e.options(false))
	res := results(t, run)
	for _, h := range []string{"h2", "h3"} {
		if tr := res["one "+h]; tr == nil || tr.Status != report.Changed {
			t.Errorf("one %s = %+v, want changed", h, tr)
		}
	}
	if len(run.Errors) != 0 {
		t.Errorf("errors = %q", run.Errors)
	}
	if len(run.Lost) != 1 || !strings.Contains(run.Lost[0], "host h1 unreachable") {
		t.Errorf("lost = %q, want h1 named", run.Lost)
	}
	if run.ExitCode() != report.ExitUnreachable {
		t.Errorf("exit code %d, want %d", run.ExitCode(), report.ExitUnreachable)
	}
}

// TestStoppedPlayNamesHostsNotAttempted: a serial play stopped by a
// failure says, per host, that the later batches were not attempted.
func TestStoppedPlayNamesHostsNotAttempted(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  serial: 1\n  max_fail_percentage: 0\n  tasks:\n" + task("one", "t1", "fail_on: h1"))
	run := e.run(plays, e.options(false))
	for _, h := range []string{"h2", "h3"} {
		if why := run.NotAttempted[h]; !strings.Contains(why, "stopped in batch 1") {
			t.Errorf("not attempted %s: %q", h, why)
		}
	}
	if _, ok := run.NotAttempted["h1"]; ok {
		t.Error("h1 was attempted")
	}
}
