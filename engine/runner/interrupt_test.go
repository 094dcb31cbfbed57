package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"nodeconverge/engine/module"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	"nodeconverge/engine/transport"
)

// interruptHook is what test_interrupt's Apply does: it interrupts the run
// (as the first signal would) while its own step is in flight.
var interruptHook atomic.Pointer[func(ctx context.Context) error]

// interruptModule is an imperative step (a restart, say) that interrupts
// the run from inside its Apply and then does what the hook says; it can
// restore its service (Registration.Restore), and records that it did.
type interruptModule struct{ restartModule }

func (interruptModule) Apply(ctx context.Context, h transport.Writer, _ *module.Plan) (*module.Result, error) {
	current.Load().record("apply interrupt " + h.Host())
	if err := (*interruptHook.Load())(ctx); err != nil {
		return nil, err
	}
	return &module.Result{Changed: true, Msg: "restarted svc"}, nil
}

func (interruptModule) Restore(_ context.Context, h transport.Writer, _ *module.Plan) (string, error) {
	current.Load().record("restore " + h.Host())
	return "svc active", nil
}

func init() {
	module.Register(module.Registration{Name: "test_interrupt", Module: interruptModule{}, Imperative: true, Restore: interruptModule{}.Restore})
}

const interruptPlay = "- hosts: all\n  tasks:\n" +
	"    - name: first\n      test_file:\n        path: \"{{ dir }}/{{ inventory_hostname }}.conf\"\n        content: \"new\\n\"\n        label: first\n      notify: restart\n" +
	"    - name: interrupt\n      test_interrupt: {}\n" +
	"    - name: third\n      test_file:\n        path: \"{{ dir }}/{{ inventory_hostname }}.third\"\n        content: \"third\\n\"\n        label: third\n" +
	"  handlers:\n    - name: restart\n      test_restart: {}\n"

// TestInterruptFinishesStepInFlight: the run is interrupted while a step is
// in flight on the host. The step finishes; the next task does not start;
// the host, half way through the play, is rolled back; the handler is not
// run but stays owed; the run says it was interrupted and the host's state.
func TestInterruptFinishesStepInFlight(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "conf", "old\n")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	hook := func(context.Context) error { cancel(errors.New("by SIGTERM")); return nil }
	interruptHook.Store(&hook)
	run, err := runner.Run(ctx, e.inv, e.load(interruptPlay), e.options(false))
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, run)
	if tr := rs["interrupt h1"]; tr == nil || tr.Status != report.Changed {
		t.Fatalf("interrupt h1 = %+v, want the step in flight finished", tr)
	}
	if tr := rs["third h1"]; tr != nil {
		t.Fatalf("third h1 = %+v, want the task not started", tr)
	}
	if _, ok := e.read("h1", "third"); ok {
		t.Error("the third task wrote after the interruption")
	}
	if tr := rs["roll back h1"]; tr == nil || !strings.Contains(tr.Msg, "the run was interrupted (by SIGTERM) before this host ran every task") {
		t.Fatalf("roll back h1 = %+v, want the host rolled back for the interruption", tr)
	}
	if got, _ := e.read("h1", "conf"); got != "old\n" {
		t.Errorf("h1.conf = %q: the host left half way was not rolled back", got)
	}
	if e.p.restarts["h1"] != 0 {
		t.Error("the handler ran after the interruption")
	}
	state := run.Interrupted["h1"]
	for _, want := range []string{`task "interrupt" in flight at the signal finished: restarted svc`, `handler "restart" owed`} {
		if !strings.Contains(state, want) {
			t.Errorf("h1's state %q does not say %q", state, want)
		}
	}
	if len(run.Errors) == 0 || !strings.Contains(run.Errors[0], "interrupted (by SIGTERM)") {
		t.Errorf("run errors = %q, want the interruption", run.Errors)
	}
}

// TestInterruptCutsShortAfterGrace: a step in flight that does not finish
// within the grace is cut short: it fails with the cause, the host is
// rolled back, and its service restored (Registration.Restore).
func TestInterruptCutsShortAfterGrace(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "conf", "old\n")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	hook := func(step context.Context) error {
		cancel(errors.New("by SIGINT"))
		<-step.Done() // a restart that would not end by itself
		return fmt.Errorf("restart: %w", step.Err())
	}
	interruptHook.Store(&hook)
	o := e.options(false)
	o.InterruptGrace = 50 * time.Millisecond
	run, err := runner.Run(ctx, e.inv, e.load(interruptPlay), o)
	if err != nil {
		t.Fatal(err)
	}
	tr := results(t, run)["interrupt h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "cut short 50ms after the interruption (by SIGINT)") ||
		!strings.Contains(tr.Msg, "service restored: svc active") {
		t.Fatalf("interrupt h1 = %+v, want cut short, rolled back and restored", tr)
	}
	if got, _ := e.read("h1", "conf"); got != "old\n" {
		t.Errorf("h1.conf = %q: the cut-short host was not rolled back", got)
	}
	if !strings.Contains(strings.Join(e.p.entries(), "\n"), "restore h1") {
		t.Errorf("the service was not restored: %q", e.p.entries())
	}
	if state := run.Interrupted["h1"]; !strings.Contains(state, "service restored: svc active") {
		t.Errorf("h1's state %q does not say the service was restored", state)
	}
}

// TestInterruptCutsShortLoopRestores: a looped step with
// Registration.Restore cut short after the grace has its service restored
// too, as the same step without a loop: a loop must not leave it down.
func TestInterruptCutsShortLoopRestores(t *testing.T) {
	e := newEnv(t, "h1")
	e.write("h1", "conf", "old\n")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	hook := func(step context.Context) error {
		cancel(errors.New("by SIGINT"))
		<-step.Done()
		return fmt.Errorf("restart: %w", step.Err())
	}
	interruptHook.Store(&hook)
	o := e.options(false)
	o.InterruptGrace = 50 * time.Millisecond
	play := strings.Replace(interruptPlay, "      test_interrupt: {}\n", "      test_interrupt: {}\n      loop: [a, b]\n", 1)
	run, err := runner.Run(ctx, e.inv, e.load(play), o)
	if err != nil {
		t.Fatal(err)
	}
	tr := results(t, run)["interrupt h1"]
	if tr == nil || tr.Status != report.Failed || !strings.Contains(tr.Msg, "service restored: svc active") {
		t.Fatalf("interrupt h1 = %+v, want cut short and its service restored", tr)
	}
	if !strings.Contains(strings.Join(e.p.entries(), "\n"), "restore h1") {
		t.Errorf("the service was not restored: %q", e.p.entries())
	}
}
