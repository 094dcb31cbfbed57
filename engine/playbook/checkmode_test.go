package playbook

import (
	"strings"
	"testing"
)

// TestCheckModeLoad: check_mode on a task wins over its block's, which
// wins over the play's; a task none speaks for has none; a non-boolean is
// refused at its file:line:col.
func TestCheckModeLoad(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  check_mode: true
  tasks:
    - {name: a, noop_t: {}}
    - block:
        - {name: b, noop_t: {}}
        - {name: c, noop_t: {}, check_mode: yes}
      check_mode: false
- hosts: all
  tasks:
    - {name: d, noop_t: {}}
`)
	if err != nil {
		t.Fatal(err)
	}
	ts := append(plays[0].Tasks, plays[1].Tasks...)
	for i, want := range []string{"true", "false", "true", "nil"} {
		got := "nil"
		if ts[i].CheckMode != nil {
			got = map[bool]string{true: "true", false: "false"}[*ts[i].CheckMode]
		}
		if got != want {
			t.Errorf("%s: check_mode %s, want %s", ts[i].Name, got, want)
		}
	}
	_, err = loadText(t, `- hosts: all
  tasks:
    - {name: a, noop_t: {}, check_mode: "{{ x }}"}
`)
	if err == nil || !strings.Contains(err.Error(), "play.yaml:3:41: check_mode must be true or false") {
		t.Errorf("err %v", err)
	}
}
