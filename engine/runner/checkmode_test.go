package runner_test

import (
	"strings"
	"testing"

	"nodeconverge/engine/report"
)

// checkModePlay has a task that runs in check mode whatever the run's
// mode, a command with check_mode: false, and tasks that read them.
const checkModePlay = `- hosts: all
  gather_facts: false
  tasks:
    - name: would write
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.would", content: "x\n"}
      check_mode: true
      register: would
    - name: probe
      command: "true"
      check_mode: false
      changed_when: false
    - block:
        - name: said
          copy: {dest: "{{ dir }}/{{ inventory_hostname }}.said", content: "{{ would.changed }}\n"}
      check_mode: false
`

// TestCheckModeKeyword: check_mode: true in an apply plans and reports
// the task (changed) without writing, and what it registers is a check's
// result; check_mode: false in --check still runs no command (skipped,
// saying so), and changes nothing where the run applies.
func TestCheckModeKeyword(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(checkModePlay), e.options(false))
	res := results(t, run)
	if tr := res["would write h1"]; tr == nil || tr.Status != report.Changed {
		t.Errorf("would write: %+v", tr)
	}
	if got, ok := e.read("h1", "would"); ok {
		t.Errorf("check_mode: true wrote %q", got)
	}
	if got, _ := e.read("h1", "said"); got != "True\n" {
		t.Errorf("said = %q, want the registered check result (changed)", got)
	}
	if tr := res["probe h1"]; tr == nil || tr.Status != report.OK {
		t.Errorf("probe in an apply: %+v", tr)
	}

	e = newEnv(t, "h1")
	run = e.run(e.load(checkModePlay), e.options(true))
	res = results(t, run)
	if tr := res["probe h1"]; tr == nil || tr.Status != report.Skipped || !strings.Contains(tr.Msg, "check_mode: false or not") {
		t.Errorf("probe in --check: %+v", tr)
	}
	if _, ok := e.read("h1", "said"); ok {
		t.Error("check_mode: false on a block wrote in --check")
	}
}
