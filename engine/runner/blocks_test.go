package runner_test

import (
	"context"
	"strings"
	"testing"

	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	_ "nodeconverge/modules/fail"
)

// blockPlay fails "may fail" on h1 only, inside a block with a rescue and
// an always, between a write before the block and one after it.
const blockPlay = `- hosts: all
  gather_facts: false
  tasks:
    - name: before
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.before", content: "b\n"}
    - block:
        - name: in block
          copy: {dest: "{{ dir }}/{{ inventory_hostname }}.block", content: "x\n"}
        - name: may fail
          command: "{{ 'false' if inventory_hostname == 'h1' else 'true' }}"
        - name: after the failure
          copy: {dest: "{{ dir }}/{{ inventory_hostname }}.rest", content: "x\n"}
      rescue:
        - name: rescue
          copy:
            dest: "{{ dir }}/{{ inventory_hostname }}.rescue"
            content: "{{ ansible_failed_task.name }} rc={{ ansible_failed_result.rc }}\n"
      always:
        - name: always
          copy: {dest: "{{ dir }}/{{ inventory_hostname }}.always", content: "x\n"}
    - name: end
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.end", content: "x\n"}
`

// TestBlockRescueAlways: a failure in a block runs its rescue on that host
// only (with ansible_failed_task and ansible_failed_result), skips the
// rest of the block there, runs always everywhere, and the rescued host
// goes on with the play, counted rescued and not failed, as in Ansible.
// The block's write before the failure stays (nothing is rolled back).
func TestBlockRescueAlways(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	run := e.run(e.load(blockPlay), e.options(false))
	if code := run.ExitCode(); code != 0 {
		t.Errorf("exit %d, want 0 (the failure was rescued)", code)
	}
	want := map[string]map[string]string{
		"h1": {"before": "b\n", "block": "x\n", "rescue": "may fail rc=1\n", "always": "x\n", "end": "x\n", "rest": ""},
		"h2": {"before": "b\n", "block": "x\n", "rest": "x\n", "always": "x\n", "end": "x\n", "rescue": ""},
	}
	for h, files := range want {
		for name, content := range files {
			got, ok := e.read(h, name)
			if content == "" && ok {
				t.Errorf("%s.%s exists (%q): that task must not run there", h, name, got)
			}
			if content != "" && got != content {
				t.Errorf("%s.%s = %q, want %q", h, name, got, content)
			}
		}
	}
	rc1, rc2 := run.Recap["h1"], run.Recap["h2"]
	if rc1.Failed != 0 || rc1.Rescued != 1 || rc1.Changed != 5 {
		t.Errorf("h1 recap %+v: want failed=0 rescued=1 changed=5", *rc1)
	}
	if rc2.Failed != 0 || rc2.Rescued != 0 || rc2.Changed != 6 {
		t.Errorf("h2 recap %+v: want changed=6 and nothing rescued", *rc2)
	}
	res := results(t, run)
	if _, ok := res["after the failure h1"]; ok {
		t.Error("the block's task after the failure was reported on h1")
	}
	if _, ok := res["rescue h2"]; ok {
		t.Error("the rescue was reported on h2, where nothing failed")
	}

	// The second run changes only what a command always changes, and is
	// rescued the same way.
	run = e.run(e.load(blockPlay), e.options(false))
	if rc := run.Recap["h1"]; rc.Rescued != 1 || rc.Failed != 0 || rc.Changed != 0 {
		t.Errorf("second run, h1 recap %+v: want rescued=1, nothing changed", *rc)
	}
}

// TestBlockAlwaysThenRollback: a failure no rescue catches runs the
// block's always, then fails the host: its whole run is rolled back then,
// the always's writes too, and the task after the block does not run.
func TestBlockAlwaysThenRollback(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: before
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.before", content: "b\n"}
    - block:
        - name: fails
          command: "false"
      always:
        - name: always
          copy: {dest: "{{ dir }}/{{ inventory_hostname }}.always", content: "x\n"}
    - name: end
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.end", content: "x\n"}
`), e.options(false))
	res := results(t, run)
	if tr := res["always h1"]; tr == nil || tr.Status != report.Changed {
		t.Fatalf("always did not run after the failure: %+v", tr)
	}
	if _, ok := res["end h1"]; ok {
		t.Error("the task after the block ran on a failed host")
	}
	if rc := run.Recap["h1"]; rc.Failed != 1 || rc.Rescued != 0 {
		t.Errorf("recap %+v: want failed=1", *rc)
	}
	for _, name := range []string{"before", "always"} {
		if got, ok := e.read("h1", name); ok {
			t.Errorf("%s = %q: the failed host's run was not rolled back", name, got)
		}
	}
	if tr := res["fails h1"]; !strings.Contains(tr.Msg, "rolled back") {
		t.Errorf("the failure does not say it was rolled back: %q", tr.Msg)
	}
	if len(run.Notes) == 0 || !strings.Contains(strings.Join(run.Notes, "\n"), "no rescue caught it") {
		t.Errorf("notes %q: want the rollback after always said", run.Notes)
	}
}

// nestedPlay fails a task while planning (assert) inside an inner block
// with only an always, inside an outer block with a rescue; its rescue
// fails where fail_rescue is set.
const nestedPlay = `- hosts: all
  gather_facts: false
  tasks:
    - block:
        - name: first
          copy: {dest: "{{ dir }}/{{ inventory_hostname }}.first", content: "x\n"}
        - block:
            - name: refuses
              assert: {that: "false"}
          always:
            - name: inner always
              copy: {dest: "{{ dir }}/{{ inventory_hostname }}.inner", content: "x\n"}
      rescue:
        - name: outer rescue
          fail: {msg: rescue fails}
          when: fail_rescue | default(false)
        - name: rescued
          copy: {dest: "{{ dir }}/{{ inventory_hostname }}.rescued", content: "x\n"}
`

// TestBlockNestedAndPlanned: a task whose plan fails inside an inner
// block with only an always is caught by the outer block's rescue after
// the inner always ran; the writes before it were planned and made. A
// rescue that fails fails the host, and its run is rolled back.
func TestBlockNestedAndPlanned(t *testing.T) {
	for _, failRescue := range []bool{false, true} {
		e := newEnv(t, "h1")
		o := e.options(false)
		o.ExtraVars["fail_rescue"] = failRescue
		run := e.run(e.load(nestedPlay), o)
		rc := run.Recap["h1"]
		if rc.Rescued != 1 || rc.Failed != map[bool]int{false: 0, true: 1}[failRescue] {
			t.Errorf("fail_rescue=%v: recap %+v: want rescued=1 and failed only when the rescue fails", failRescue, *rc)
		}
		for _, name := range []string{"first", "inner", "rescued"} {
			_, ok := e.read("h1", name)
			if !failRescue && !ok {
				t.Errorf("h1.%s missing", name)
			}
			if failRescue && ok {
				t.Errorf("h1.%s exists: the host whose rescue failed was not rolled back", name)
			}
		}
	}
}

// TestBlockCheckMode: check mode runs no command, so nothing fails and
// no rescue runs; the block's tasks are planned as in apply.
func TestBlockCheckMode(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	run := e.run(e.load(blockPlay), e.options(true))
	res := results(t, run)
	if _, ok := res["rescue h1"]; ok {
		t.Error("check mode ran a rescue")
	}
	if tr := res["always h1"]; tr == nil || tr.Status != report.Changed {
		t.Errorf("always in check mode: %+v", tr)
	}
	if _, ok := e.read("h1", "before"); ok {
		t.Error("check mode wrote")
	}
}

// TestBlockNotSaved: a plan saved with --out cannot say which of a
// block's sections run, so it is refused, naming the block.
func TestBlockNotSaved(t *testing.T) {
	e := newEnv(t, "h1")
	_, _, err := runner.Plan(context.Background(), e.inv, e.load(blockPlay), []string{"play.yaml"}, e.options(true))
	if err == nil || !strings.Contains(err.Error(), "cannot be saved in a plan") {
		t.Fatalf("Plan: %v, want a refusal", err)
	}
}

// TestBlockFailureStopsPlay: a host that fails once its always sections
// ran counts against max_fail_percentage before the next task starts, as
// Ansible's linear strategy counts it with the always task's result: the
// play stops there, and the other host does not run the next task.
func TestBlockFailureStopsPlay(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  max_fail_percentage: 0
  tasks:
    - block:
        - name: fails on h1
          command: "{{ 'false' if inventory_hostname == 'h1' else 'true' }}"
      always:
        - name: always
          command: "true"
    - name: next
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.next", content: "x\n"}
    - name: last
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.last", content: "x\n"}
`), e.options(false))
	for _, tr := range run.Results {
		if tr.Task == "next" {
			t.Errorf("next ran on %s (%s) after h1 failed past max_fail_percentage 0", tr.Host, tr.Status)
		}
	}
	if len(run.Errors) == 0 || !strings.Contains(strings.Join(run.Errors, "\n"), "max_fail_percentage") {
		t.Errorf("errors %q: want the play stopped by max_fail_percentage", run.Errors)
	}
}
