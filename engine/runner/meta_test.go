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

// TestFlushHandlersWhen: a flush_handlers task's when: (its own, or one
// it inherits from a block or an include) is decided per host, as
// Ansible's strategy does: where it is false the handlers wait for the
// batch's end.
func TestFlushHandlersWhen(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: config
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.conf", content: "c\n"}
      notify: reload
    - meta: flush_handlers
      when: inventory_hostname == 'h1'
    - name: after
      shell: 'echo task >> {{ dir }}/{{ inventory_hostname }}.log'
  handlers:
    - name: reload
      shell: 'echo reloaded >> {{ dir }}/{{ inventory_hostname }}.log'
`), e.options(false))
	for _, tr := range run.Results {
		if tr.Status == report.Failed {
			t.Errorf("%s %s: %s", tr.Task, tr.Host, tr.Msg)
		}
	}
	for h, want := range map[string]string{"h1": "reloaded\ntask\n", "h2": "task\nreloaded\n"} {
		if got, _ := e.read(h, "log"); got != want {
			t.Errorf("%s: log = %q, want %q", h, got, want)
		}
	}
}

// TestFlushHandlersWhenFails: a flush_handlers when: that cannot be
// decided fails the host, and its run so far is rolled back, as any
// failure after a write.
func TestFlushHandlersWhenFails(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(`- hosts: all
  gather_facts: false
  tasks:
    - name: config
      copy: {dest: "{{ dir }}/{{ inventory_hostname }}.conf", content: "c\n"}
      notify: reload
      register: cfg
    - name: flush
      meta: flush_handlers
      when: cfg.no_such_key.deeper
  handlers:
    - name: reload
      shell: 'echo reloaded >> {{ dir }}/{{ inventory_hostname }}.log'
`), e.options(false))
	res := results(t, run)
	if tr := res["flush h1"]; tr == nil || tr.Status != report.Failed {
		t.Fatalf("flush: %+v, want failed", tr)
	}
	if got, ok := e.read("h1", "conf"); ok {
		t.Errorf("conf = %q after the failure: want it rolled back", got)
	}
	if got, _ := e.read("h1", "log"); got != "" {
		t.Errorf("the handler ran on the failed host: log = %q", got)
	}
}
