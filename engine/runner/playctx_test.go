package runner_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
)

// test_play records, per Check, the play module.PlayOf hands it: the
// labels of the play's tasks as rendered on the host and which one is
// being checked. Nothing else.
func init() { module.Register(module.Registration{Name: "test_play", Module: playModule{}}) }

type playArgs struct {
	Label string `yaml:"label"`
}

func (*playArgs) Validate() error { return nil }

type playModule struct{}

var playSeen struct {
	sync.Mutex
	log []string
}

func (playModule) NewArgs() module.Args { return &playArgs{} }

func (playModule) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	p := module.PlayOf(ctx)
	var labels []string
	for i, t := range p.Tasks {
		l := t.Module
		if a, ok := t.Args.(*playArgs); ok {
			l = a.Label
		}
		if i == p.Self {
			l = "*" + l
		}
		labels = append(labels, l)
	}
	playSeen.Lock()
	playSeen.log = append(playSeen.log, fmt.Sprintf("%s %s: %s", margs.(*playArgs).Label, h.Host(), strings.Join(labels, ",")))
	playSeen.Unlock()
	return &module.Plan{}, nil
}

func (playModule) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}

// TestChecksSeeTheirPlay: every Check, in check mode and while apply
// plans the host, gets the play's tasks with their arguments as rendered
// on that host (a {{ }} per host, a task its when: skips left out) and
// knows which one it is.
func TestChecksSeeTheirPlay(t *testing.T) {
	for _, check := range []bool{true, false} {
		e := newEnv(t, "h1", "h2")
		playSeen.Lock()
		playSeen.log = nil
		playSeen.Unlock()
		plays := e.load(`- hosts: all
  tasks:
    - name: a
      test_play:
        label: "a-{{ inventory_hostname }}"
    - name: b
      test_play:
        label: b
      when: inventory_hostname == "h1"
    - name: c
      test_play:
        label: c
`)
		run := e.run(plays, e.options(check))
		if run.ExitCode() != report.ExitOK {
			t.Fatalf("check=%v: exit %d", check, run.ExitCode())
		}
		playSeen.Lock()
		got := map[string]bool{}
		for _, l := range playSeen.log {
			got[l] = true
		}
		playSeen.Unlock()
		for _, want := range []string{
			"a-h1 h1: *a-h1,b,c", "b h1: a-h1,*b,c", "c h1: a-h1,b,*c",
			"a-h2 h2: *a-h2,c", "c h2: a-h2,*c",
		} {
			if !got[want] {
				t.Errorf("check=%v: no Check saw %q; saw %v", check, want, got)
			}
		}
	}
}
