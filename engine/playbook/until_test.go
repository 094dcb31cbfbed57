package playbook

import (
	"strings"
	"testing"
	"time"

	"nodeconverge/engine/module"
)

// command is a fake of a module until: runs again (it states Retries).
func init() {
	module.Register(module.Registration{Name: "command", Module: fake{func() module.Args { return &commandArgs{} }}, Retries: true})
}

// TestUntilLoad: until: takes Ansible's defaults (3 attempts, 5 s apart),
// retries: N is N+1 attempts (0 or less: one), delay: 0 is none; without
// until, retries and delay do nothing. until on a converge module, with
// a loop, or with a templated count is refused at its file:line:col.
func TestUntilLoad(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - {name: a, command: "true", register: r, until: r.rc == 0}
    - {name: b, command: "true", register: r, until: r.rc == 0, retries: 9, delay: 0}
    - {name: c, command: "true", register: r, until: r.rc == 0, retries: -2, delay: -1}
    - {name: d, command: "true", retries: 9, delay: 7}
`)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		attempts int
		delay    time.Duration
	}{{3, 5 * time.Second}, {10, 0}, {1, time.Second}, {0, 0}} {
		task := plays[0].Tasks[i]
		if task.Attempts != want.attempts || task.Delay != want.delay {
			t.Errorf("%s: %d attempts %s apart, want %d, %s", task.Name, task.Attempts, task.Delay, want.attempts, want.delay)
		}
	}
	_, err = loadText(t, `- hosts: all
  tasks:
    - name: x
      noop_t: {}
      until: x is defined
    - name: y
      command: "true"
      until: x is defined
      retries: "{{ n }}"
    - name: z
      command: "true"
      loop: [1]
      until: x is defined
`)
	for _, want := range []string{
		`play.yaml:5:7: until: on noop_t: not supported`,
		`play.yaml:9:16: retries: "{{ n }}": a template is not supported here`,
		`play.yaml:13:7: until: with a loop: not supported`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}
