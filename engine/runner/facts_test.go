package runner_test

import (
	"strings"
	"testing"

	"nodeconverge/engine/report"
	_ "nodeconverge/modules/assert"
	_ "nodeconverge/modules/copy"
	_ "nodeconverge/modules/debug"
	_ "nodeconverge/modules/lineinfile"
	_ "nodeconverge/modules/set_fact"
	_ "nodeconverge/modules/stat"
)

const factsPlay = `- hosts: all
  tasks:
    - name: modules list
      stat:
        path: "{{ dir }}/{{ inventory_hostname }}.mods"
      register: st
    - name: remember
      set_fact:
        had_file: "{{ st.stat.exists }}"
        tag: "yes"
        mods: []
    - name: collect
      set_fact:
        mods: "{{ mods + [item] }}"
      loop: [overlay, br_netfilter]
    - name: write when missing
      when: not had_file
      copy:
        dest: "{{ dir }}/{{ inventory_hostname }}.mods"
        content: "{{ mods | join('\n') }}\n"
    - name: see the planned file
      stat:
        path: "{{ dir }}/{{ inventory_hostname }}.mods"
      register: st2
    - name: it is there now
      assert:
        that:
          - st2.stat.exists
          - st2.stat.size > 0
          - tag is sameas true
        success_msg: "{{ inventory_hostname }} ready"
    - name: one more line
      lineinfile:
        path: "{{ dir }}/{{ inventory_hostname }}.mods"
        line: nvidia
      register: li
    - name: say
      debug:
        var: li.msg
      register: said
    - name: quiet unless -v
      debug:
        msg: hidden
        verbosity: 1
`

// TestFactsAndRegisteredValues: stat's values reach register (and the
// up-front plan: the write is decided from them, and a later stat sees
// the planned file), set_fact's facts are the host's variables for the
// later tasks (a loop accumulates), assert evaluates its expressions with
// them, debug registers and says its value, and verbosity skips.
func TestFactsAndRegisteredValues(t *testing.T) {
	for _, check := range []bool{true, false} {
		e := newEnv(t, "h1", "h2")
		e.write("h2", "mods", "existing\n")
		run := e.run(e.load(factsPlay), e.options(check))
		res := results(t, run)
		want := map[string]report.Status{
			"write when missing h1": report.Changed, "write when missing h2": report.Skipped,
			"it is there now h1": report.OK, "it is there now h2": report.OK,
			"one more line h1": report.Changed, "one more line h2": report.Changed,
			"say h1": report.OK, "quiet unless -v h1": report.Skipped,
		}
		for k, st := range want {
			if tr := res[k]; tr == nil || tr.Status != st {
				t.Errorf("check=%v: %s: got %+v, want %s", check, k, tr, st)
			}
		}
		if tr := res["it is there now h1"]; tr == nil || tr.Msg != "h1 ready" {
			t.Errorf("check=%v: assert's success_msg: %+v", check, tr)
		}
		if tr := res["say h1"]; tr == nil || !strings.Contains(tr.Msg, "line added") {
			t.Errorf("check=%v: debug var: %+v", check, tr)
		}
		if check {
			if _, ok := e.read("h1", "mods"); ok {
				t.Error("check mode wrote")
			}
			continue
		}
		if got, _ := e.read("h1", "mods"); got != "overlay\nbr_netfilter\nnvidia\n" {
			t.Errorf("h1.mods = %q", got)
		}
		if got, _ := e.read("h2", "mods"); got != "existing\nnvidia\n" {
			t.Errorf("h2.mods = %q", got)
		}
	}
}

// TestAssertFailsBeforeAnyWrite: in apply mode a failing assert fails the
// host in the up-front plan, with its message, and the earlier task's
// write never happens there.
func TestAssertFailsBeforeAnyWrite(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  tasks:
    - name: write
      copy:
        dest: "{{ dir }}/{{ inventory_hostname }}.x"
        content: "x\n"
    - name: require
      assert:
        that: inventory_hostname == 'nope'
        fail_msg: "not the host we want"
`), e.options(false))
	var failed *report.TaskResult
	for _, tr := range run.Results {
		if tr.Status == report.Failed {
			failed = tr
		}
	}
	if failed == nil || !strings.Contains(failed.Msg, "not the host we want") || !strings.Contains(failed.Msg, "nothing was written") {
		t.Fatalf("failure: %+v", failed)
	}
	if _, ok := e.read("h1", "x"); ok {
		t.Error("the write before the failing assert happened")
	}
}

// TestLoopEditsOneFileAndLateFacts: a loop whose items edit the same new
// file (lineinfile, create) applies as planned, item after item; a fact
// set from a command's output is planned when the host reaches it, and so
// is every task that reads the fact (never decided without it); a loop's
// registered results are predicted for the up-front plan.
func TestLoopEditsOneFileAndLateFacts(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  tasks:
    - name: blacklist
      lineinfile:
        path: "{{ dir }}/{{ inventory_hostname }}.bl"
        line: "{{ item }}"
        create: true
      loop: [blacklist nouveau, options nouveau modeset=0]
      register: bl
    - name: count
      set_fact:
        n: "{{ bl.results | map(attribute='msg') | list | length }}"
    - name: ask
      command: "echo ready"
      register: out
      changed_when: false
    - name: from the command
      set_fact:
        word: "{{ out.stdout }}"
    - name: check
      assert:
        that:
          - word == 'ready'
          - n | int == 2
`), e.options(false))
	for _, tr := range run.Results {
		if tr.Status == report.Failed {
			t.Fatalf("%s failed: %s", tr.Task, tr.Msg)
		}
	}
	if got, _ := e.read("h1", "bl"); got != "blacklist nouveau\noptions nouveau modeset=0\n" {
		t.Errorf("h1.bl = %q", got)
	}
}
