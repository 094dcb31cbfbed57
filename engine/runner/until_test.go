package runner_test

import (
	"strings"
	"testing"

	"nodeconverge/engine/report"
)

// TestUntilRetries: a command runs again until its until: holds, with the
// attempts in its registered result; one that never holds fails after
// retries+1 attempts, its result saying one attempt less, as Ansible's.
func TestUntilRetries(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: third time lucky
      shell: 'f={{ dir }}/{{ inventory_hostname }}.n; n=$(cat "$f" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$f"; [ $n -ge 3 ]'
      register: lucky
      until: lucky.rc == 0
      retries: 5
      delay: 0
    - name: never
      command: "false"
      register: never
      until: never.rc == 0
      retries: 1
      delay: 0
      ignore_errors: true
    - name: results
      copy:
        dest: "{{ dir }}/{{ inventory_hostname }}.results"
        content: "{{ lucky.attempts }} {{ lucky.rc }} {{ never.attempts }} {{ never.failed }}\n"
`), e.options(false))
	res := results(t, run)
	if tr := res["third time lucky h1"]; tr == nil || tr.Status != report.Changed || !strings.Contains(tr.Msg, "after 3 attempts") {
		t.Errorf("third time lucky: %+v", tr)
	}
	if tr := res["never h1"]; tr == nil || tr.Status != report.Failed || !tr.Ignored || !strings.Contains(tr.Msg, "still false after 2 attempts") {
		t.Errorf("never: %+v", tr)
	}
	if got, _ := e.read("h1", "n"); got != "3\n" {
		t.Errorf("the command ran %q times, want 3", got)
	}
	if got, _ := e.read("h1", "results"); got != "3 0 1 True\n" {
		t.Errorf("registered: %q, want %q", got, "3 0 1 True\n")
	}
}

// TestUntilNoRetries: with retries: 0 Ansible runs the task once and
// never judges its until (task_executor checks the condition only when
// more than one attempt is allowed): the result stands as the command
// left it, with one attempt registered.
func TestUntilNoRetries(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: once
      command: "true"
      register: once
      until: once.rc == 1
      retries: 0
    - name: results
      copy:
        dest: "{{ dir }}/{{ inventory_hostname }}.results"
        content: "{{ once.attempts }} {{ once.failed }}\n"
`), e.options(false))
	res := results(t, run)
	if tr := res["once h1"]; tr == nil || tr.Status == report.Failed {
		t.Errorf("once: %+v, want it not failed", tr)
	}
	if got, _ := e.read("h1", "results"); got != "1 False\n" {
		t.Errorf("registered: %q, want %q", got, "1 False\n")
	}
}

// TestUntilIgnoredAttemptForgotten: a failed attempt that ignore_errors
// ignored leaves nothing on the attempt that succeeds: the task's result
// is the last attempt's, as Ansible's is.
func TestUntilIgnoredAttemptForgotten(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: second time
      shell: 'f={{ dir }}/{{ inventory_hostname }}.n; n=$(cat "$f" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$f"; [ $n -ge 2 ]'
      register: second
      until: second.rc == 0
      retries: 2
      delay: 0
      ignore_errors: true
`), e.options(false))
	res := results(t, run)
	if tr := res["second time h1"]; tr == nil || tr.Status != report.Changed || tr.Ignored {
		t.Errorf("second time: %+v, want changed and not ignored", tr)
	}
}
