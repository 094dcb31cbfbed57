package playbook

import (
	"strings"
	"testing"
)

// TestMetaLoad: meta: flush_handlers and noop load as the runner's own
// tasks; the other actions, meta in a handler, and meta with a module or
// a register are refused at their file:line:col.
func TestMetaLoad(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - meta: flush_handlers
    - ansible.builtin.meta: noop
`)
	if err != nil {
		t.Fatal(err)
	}
	if ts := plays[0].Tasks; len(ts) != 2 || ts[0].Meta != "flush_handlers" || ts[1].Meta != "noop" || ts[0].DisplayName() != "meta" {
		t.Fatalf("tasks %+v", ts)
	}
	_, err = loadText(t, `- hosts: all
  tasks:
    - meta: end_play
    - meta: nonsense
    - meta: noop
      register: x
  handlers:
    - name: h
      meta: flush_handlers
`)
	for _, want := range []string{
		`play.yaml:3:13: meta: end_play is not supported`,
		`play.yaml:4:13: meta: unknown action "nonsense"`,
		`play.yaml:5:7: meta: noop takes no args, register`,
		`play.yaml:9:13: meta: flush_handlers in a handler: not supported`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}
