package runner_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"nodeconverge/engine/facts"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
)

// countConn counts a connection's round trips (one script each).
type countConn struct {
	transport.HolderConn
	n *atomic.Int64
}

func (c countConn) Run(ctx context.Context, script string, stdin []byte) (*transport.CmdResult, error) {
	c.n.Add(1)
	return c.HolderConn.Run(ctx, script, stdin)
}

// TestGatherFactsInFirstRoundTrip: a play without gather_facts that reads
// facts runs (Ansible's default), with the node's own values, and
// gathering costs no round trip: the same play with the facts written
// out takes as many. Ansible's recap has its "Gathering Facts" ok.
func TestGatherFactsInFirstRoundTrip(t *testing.T) {
	out, err := localconn.New("x").Run(context.Background(), facts.Query().Cmds[0].Script, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := facts.Parse(out.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	const play = `- hosts: all
  vars:
    arch: "{{ ansible_architecture }}"
  tasks:
    - name: write
      when: (ansible_os_family == FAMILY)
      copy:
        dest: "{{ dir }}/{{ inventory_hostname }}.facts"
        content: "{{ arch }} {{ ansible_facts['distribution'] }} {{ ansible_processor_vcpus }}\n"
    - name: other family
      when: (ansible_os_family != FAMILY)
      copy:
        dest: "{{ dir }}/{{ inventory_hostname }}.other"
        content: "x"
`
	want := f["architecture"].(string) + " " + f["distribution"].(string) + " " + strconv.Itoa(f["processor_vcpus"].(int)) + "\n"
	fam := "'" + f["os_family"].(string) + "'"
	for _, check := range []bool{true, false} {
		trips := map[bool]int64{}
		for _, literal := range []bool{false, true} {
			e := newEnv(t, "h1")
			text := strings.ReplaceAll(play, "FAMILY", fam)
			if literal {
				text = strings.NewReplacer(`"{{ ansible_architecture }}"`, f["architecture"].(string),
					"ansible_os_family", fam, "{{ ansible_facts['distribution'] }}", f["distribution"].(string),
					"{{ ansible_processor_vcpus }}", strconv.Itoa(f["processor_vcpus"].(int))).Replace(text)
			}
			plays := e.load(text)
			if !literal && len(plays[0].Tasks[0].Facts) == 0 {
				t.Fatal("the task reads no facts")
			}
			var n atomic.Int64
			o := e.options(check)
			o.Dial = func(_ context.Context, h *inventory.Host, _ bool) (transport.Conn, error) {
				return countConn{localconn.New(h.Name).(transport.HolderConn), &n}, nil
			}
			run := e.run(plays, o)
			res := results(t, run)
			if tr := res["write h1"]; tr == nil || tr.Status != report.Changed {
				t.Fatalf("check=%v literal=%v: write: %+v", check, literal, tr)
			}
			if tr := res["other family h1"]; tr == nil || tr.Status != report.Skipped {
				t.Errorf("check=%v literal=%v: other family: %+v", check, literal, tr)
			}
			gathered := res["Gathering Facts h1"]
			if literal != (gathered == nil) || gathered != nil && gathered.Status != report.OK {
				t.Errorf("check=%v literal=%v: Gathering Facts: %+v", check, literal, gathered)
			}
			if !check && !literal {
				if got, _ := e.read("h1", "facts"); got != want {
					t.Errorf("written %q, want %q", got, want)
				}
			}
			trips[literal] = n.Load()
		}
		if trips[false] != trips[true] {
			t.Errorf("check=%v: %d round trips with facts, %d without: gathering must ride in the first", check, trips[false], trips[true])
		}
	}
}
