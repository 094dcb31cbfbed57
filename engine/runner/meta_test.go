package runner_test

import (
	"testing"

	"nodeconverge/engine/report"
)

// TestFlushHandlers: meta: flush_handlers runs the handlers notified so
// far where it stands (the next task sees what they did), once; a handler
// notified after it runs at the batch's end; the play is planned again
// after the flush, so a task after it that reads the handler's file plans
// on it.
func TestFlushHandlers(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: config
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.conf", content: "c\n"}
      notify: reload
    - meta: flush_handlers
    - name: needs the reload
      command: "test -f {{ dir }}/{{ inventory_hostname }}.reloaded"
    - name: after the reload
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.reloaded", content: "again\n"}
    - name: more config
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.more", content: "m\n"}
      notify: reload
    - meta: noop
  handlers:
    - name: reload
      shell: 'echo reloaded >> {{ dir }}/{{ inventory_hostname }}.reloaded'
`), e.options(false))
	var handlerRuns, failures int
	for _, tr := range run.Results {
		if tr.Task == "reload" {
			handlerRuns++
		}
		if tr.Status == report.Failed {
			failures++
			t.Errorf("%s: %s", tr.Task, tr.Msg)
		}
	}
	if handlerRuns != 2 {
		t.Errorf("the handler ran %d times, want 2 (at the flush, and at the end for the later notify)", handlerRuns)
	}
	if got, _ := e.read("h1", "reloaded"); got != "again\nreloaded\n" {
		t.Errorf("reloaded = %q: want the task's write after the flush, then the end's reload", got)
	}
	if rc := run.Recap["h1"]; rc.Changed != 6 || rc.OK != 0 {
		t.Errorf("recap %+v: meta tasks count nothing", *rc)
	}
}
