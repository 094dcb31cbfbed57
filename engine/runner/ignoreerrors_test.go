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
