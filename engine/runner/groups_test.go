package runner_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	"nodeconverge/engine/transport"
)

// openConns counts the connections a run holds open at once.
type openConns struct {
	mu        sync.Mutex
	open, max int
}

type countedConn struct {
	transport.Conn
	c *openConns
}

func (c countedConn) Close() error {
	c.c.mu.Lock()
	c.c.open--
	c.c.mu.Unlock()
	return c.Conn.Close()
}

// counting wraps o's Dial so that oc sees every connection open and close.
func (oc *openConns) counting(o runner.Options) runner.Options {
	dial := o.Dial
	o.Dial = func(ctx context.Context, h *inventory.Host, become bool) (transport.Conn, error) {
		c, err := dial(ctx, h, become)
		if err != nil {
			return nil, err
		}
		oc.mu.Lock()
		oc.open++
		oc.max = max(oc.max, oc.open)
		oc.mu.Unlock()
		return countedConn{Conn: c, c: oc}, nil
	}
	return o
}

// sealed collects what a run hands its sink.
type sealed struct {
	mu    sync.Mutex
	hosts []*report.HostReport
}

func (s *sealed) Host(_ *report.Run, hr *report.HostReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts = append(s.hosts, hr)
}

// A check holds -f hosts, not the fleet: hosts go through every play in
// groups of -f, each host's connection closed and its report handed on
// when its group is done, and with Drop the run keeps recap lines only.
func TestCheckHoldsForksHostsAtOnce(t *testing.T) {
	hosts := []string{"h1", "h2", "h3", "h4", "h5"}
	e := newEnv(t, hosts...)
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") + "- hosts: all\n  tasks:\n" + task("two", "t2"))
	var oc openConns
	o := oc.counting(e.options(true))
	o.Forks = 2
	sink := &sealed{}
	o.Sink, o.Drop = sink, true
	run := e.run(plays, o)
	if oc.max != 2 {
		t.Errorf("%d connections open at once, want -f (2)", oc.max)
	}
	if oc.open != 0 {
		t.Errorf("%d connections still open after the run", oc.open)
	}
	if n := e.dials.Load(); n != int64(len(hosts)) {
		t.Errorf("dialled %d times, want once per host over both plays (%d)", n, len(hosts))
	}
	// Group by group: h1 and h2 finish both plays before h3 starts.
	log := e.p.entries()
	if i, j := slices.Index(log, "check t2 h2"), slices.Index(log, "check t1 h3"); i < 0 || j < 0 || i > j {
		t.Errorf("h3 started before h2's group finished every play:\n%s", strings.Join(log, "\n"))
	}
	var got []string
	for _, hr := range sink.hosts {
		got = append(got, hr.Host)
		if len(hr.Results) != 2 || hr.Results[0].Task != "one" || hr.Results[1].Task != "two" {
			t.Errorf("%s: sealed results %v, want one then two", hr.Host, hr.Results)
		}
		if hr.Recap.Changed != 2 {
			t.Errorf("%s: recap %+v, want changed=2", hr.Host, hr.Recap)
		}
	}
	if !slices.Equal(got, hosts) {
		t.Errorf("sealed %v, want every host once, in order %v", got, hosts)
	}
	if len(run.Results) != 0 {
		t.Errorf("run kept %d results with Drop set", len(run.Results))
	}
	if rc := run.Recap["h5"]; rc == nil || rc.Changed != 2 {
		t.Errorf("recap of h5 = %+v, want changed=2", rc)
	}
	if run.ExitCode() != report.ExitDrift {
		t.Errorf("exit code %d, want %d", run.ExitCode(), report.ExitDrift)
	}
}

// Without Drop every result stays for the JSON report and the saved plan,
// and the sink still gets each host.
func TestCheckKeepsResultsWithoutDrop(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1"))
	o := e.options(true)
	o.Forks = 1
	sink := &sealed{}
	o.Sink = sink
	run, sp, err := runner.Plan(context.Background(), e.inv, plays, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Results) != 3 || len(sink.hosts) != 3 {
		t.Errorf("kept %d results and sealed %d hosts, want 3 and 3", len(run.Results), len(sink.hosts))
	}
	read := 0
	for _, hp := range sp.Hosts {
		if len(hp.Reads) > 0 {
			read++
		}
	}
	if len(sp.Hosts) != 3 || read != 3 {
		t.Errorf("saved the plans of %d hosts, %d with their reads; want 3 and 3 (a saved plan verifies them)", len(sp.Hosts), read)
	}
}

// max_fail_percentage counts over the whole play, not per group: two
// failures in the first group of two stop the play for the second group.
func TestCheckMaxFailCountsOverGroups(t *testing.T) {
	hosts := []string{"h1", "h2", "h3", "h4"}
	// check runs a one-task play at 25% in groups of two, failing on failOn.
	check := func(t *testing.T, failOn string) (*env, *report.Run) {
		e := newEnv(t, hosts...)
		plays := e.load("- hosts: all\n  max_fail_percentage: 25\n  tasks:\n" + task("one", "t1", "fail_on: "+failOn))
		o := e.options(true)
		o.Forks = 2
		return e, e.run(plays, o)
	}
	t.Run("above stops the later groups", func(t *testing.T) {
		e, run := check(t, "h1,h2")
		if len(run.Errors) != 1 || !strings.Contains(run.Errors[0], "2 of 4 hosts failed (50%)") {
			t.Errorf("errors = %q, want one saying 2 of 4", run.Errors)
		}
		for _, h := range hosts[2:] {
			if why := run.NotAttempted[h]; !strings.Contains(why, "max_fail_percentage") {
				t.Errorf("%s not attempted because %q, want the stopped play", h, why)
			}
		}
		if n := e.dials.Load(); n != 2 {
			t.Errorf("dialled %d hosts, want the first group's 2", n)
		}
	})
	t.Run("at the limit goes on", func(t *testing.T) {
		_, run := check(t, "h1")
		if len(run.Errors) != 0 || len(run.NotAttempted) != 0 {
			t.Errorf("errors %q, not attempted %v: 1 of 4 is exactly 25%%", run.Errors, run.NotAttempted)
		}
		for _, h := range hosts[1:] {
			if rc := run.Recap[h]; rc == nil || rc.Changed != 1 {
				t.Errorf("%s recap %+v, want changed=1", h, rc)
			}
		}
	})
}

// An apply closes a host's connection when its last play's batch ends:
// with serial: 1 the run holds one node (and its lock) at a time.
func TestApplyClosesHostAfterItsLastBatch(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  serial: 1\n  tasks:\n" + task("one", "t1"))
	var oc openConns
	o := oc.counting(e.options(false))
	run := e.run(plays, o)
	if code := run.ExitCode(); code != report.ExitOK {
		t.Fatalf("exit code %d, errors %v", code, run.Errors)
	}
	if oc.max != 1 || oc.open != 0 {
		t.Errorf("at most %d connections open at once (%d left open), want 1 (0)", oc.max, oc.open)
	}
}

// A check renders each later group's arguments as the group starts (only
// the first group's are kept from preflight): every host still gets its
// own arguments and its own when: decision, group after group.
func TestCheckRendersEachGroupAsItStarts(t *testing.T) {
	hosts := []string{"h1", "h2", "h3", "h4", "h5"}
	e := newEnv(t, hosts...)
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") +
		"    - name: two\n      when: inventory_hostname != 'h4'\n      test_file:\n        path: \"{{ dir }}/{{ inventory_hostname }}.t2\"\n        content: \"{{ inventory_hostname }}\\n\"\n        label: t2\n")
	o := e.options(true)
	o.Forks = 2
	run := e.run(plays, o)
	res := results(t, run)
	for _, h := range hosts {
		tr := res["one "+h]
		if tr == nil || tr.Status != report.Changed {
			t.Fatalf("one %s = %+v, want changed", h, tr)
		}
		if a, ok := tr.Args.(*fileArgs); !ok || a.Path != e.path(h, "t1") {
			t.Errorf("one %s ran with arguments %+v, want its own path %s", h, tr.Args, e.path(h, "t1"))
		}
		two := res["two "+h]
		switch {
		case h == "h4":
			if two == nil || two.Status != report.Skipped || !strings.Contains(two.Msg, "Conditional result was False") {
				t.Errorf("two h4 = %+v, want skipped by its when:", two)
			}
		case two == nil || two.Status != report.Changed:
			t.Errorf("two %s = %+v, want changed", h, two)
		default:
			if a, ok := two.Args.(*fileArgs); !ok || a.Content != h+"\n" {
				t.Errorf("two %s ran with arguments %+v, want content %q", h, two.Args, h+"\n")
			}
		}
	}
}

// Preflight still renders every host, so a host of the last group that
// cannot render fails the run before any host is dialled.
func TestCheckPreflightCoversLaterGroups(t *testing.T) {
	e := newEnv(t, "h1", "h2", "h3")
	plays := e.load("- hosts: all\n  tasks:\n" + task("one", "t1") +
		"    - name: typo\n      when: inventory_hostname == 'h3'\n      test_file:\n        path: \"{{ dir }}/x\"\n        content: \"{{ no_such_var }}\"\n        label: typo\n")
	o := e.options(true)
	o.Forks = 1
	_, err := runner.Run(context.Background(), e.inv, plays, o)
	if err == nil || !strings.Contains(err.Error(), "host h3") || !strings.Contains(err.Error(), `undefined variable "no_such_var"`) {
		t.Fatalf("err = %v, want h3's undefined variable", err)
	}
	if n := e.dials.Load(); n != 0 {
		t.Errorf("dialled %d hosts before preflight passed", n)
	}
}
