package runner_test

import (
	"strings"
	"testing"

	"nodeconverge/engine/report"
)

// TestTemplatedIgnoreErrors: a templated ignore_errors is decided per
// host with its variables; one that cannot be decided ignores nothing,
// and the failure says why instead of dropping the template's error.
func TestTemplatedIgnoreErrors(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: fails
      command: "false"
      ignore_errors: "{{ inventory_hostname == 'h1' }}"
    - name: broken
      command: "false"
      register: out
      ignore_errors: "{{ out.no_such_key.deeper }}"
`), e.options(false))
	res := results(t, run)
	if tr := res["fails h1"]; tr == nil || !tr.Ignored {
		t.Errorf("fails h1: %+v, want ignored", tr)
	}
	if tr := res["fails h2"]; tr == nil || tr.Status != report.Failed || tr.Ignored {
		t.Errorf("fails h2: %+v, want failed, not ignored", tr)
	}
	tr := res["broken h1"]
	if tr == nil || tr.Status != report.Failed || tr.Ignored {
		t.Fatalf("broken h1: %+v, want failed, not ignored", tr)
	}
	if !strings.Contains(tr.Msg, "ignore_errors") || !strings.Contains(tr.Msg, "no_such_key") {
		t.Errorf("broken h1: %q does not say why ignore_errors was not decided", tr.Msg)
	}
}

// TestTemplatedIgnoreErrorsPlanned: a task whose plan fails and whose
// templated ignore_errors reads an earlier task's registered result is
// decided on that result as planning predicts it (or when the host
// reaches the task), not refused for a variable the run has not
// registered yet: Ansible ignores the failure, and so does nodeconverge.
func TestTemplatedIgnoreErrorsPlanned(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: first
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.a", content: "a\n"}
      register: r
    - name: refused
      assert: {that: "false"}
      ignore_errors: "{{ r is changed }}"
    - name: cmd
      command: "true"
      register: c
    - name: refused after a command
      assert: {that: "false"}
      ignore_errors: "{{ c.rc == 0 }}"
    - name: after
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.c", content: "c\n"}
`), e.options(false))
	res := results(t, run)
	for _, name := range []string{"refused h1", "refused after a command h1"} {
		if tr := res[name]; tr == nil || tr.Status != report.Failed || !tr.Ignored {
			t.Errorf("%s: %+v, want failed and ignored", name, tr)
		}
	}
	if tr := res["after h1"]; tr == nil || tr.Status != report.Changed {
		t.Errorf("after: %+v, want the play to go on", tr)
	}
}
