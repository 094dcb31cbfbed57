package playbook

import "testing"

// TestTemplatedIgnoreErrors: a templated ignore_errors is kept as a
// condition the runner decides per host; a plain one stays a boolean; a
// template that does not parse is refused at load.
func TestTemplatedIgnoreErrors(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - noop_t: {}
      ignore_errors: "{{ sysctl_ignore_errors | default(true) }}"
    - noop_t: {}
      ignore_errors: yes
`)
	if err != nil {
		t.Fatal(err)
	}
	tpl, plain := plays[0].Tasks[0], plays[0].Tasks[1]
	if len(tpl.IgnoreErrorsWhen) != 1 || tpl.IgnoreErrors {
		t.Errorf("templated: when %v, bool %v", tpl.IgnoreErrorsWhen, tpl.IgnoreErrors)
	}
	holds, _, err := Holds(tpl.IgnoreErrorsWhen, map[string]any{})
	if err != nil || !holds {
		t.Errorf("default(true) without the variable: %v, %v", holds, err)
	}
	holds, _, err = Holds(tpl.IgnoreErrorsWhen, map[string]any{"sysctl_ignore_errors": false})
	if err != nil || holds {
		t.Errorf("with the variable false: %v, %v", holds, err)
	}
	if len(plain.IgnoreErrorsWhen) != 0 || !plain.IgnoreErrors {
		t.Errorf("plain: when %v, bool %v", plain.IgnoreErrorsWhen, plain.IgnoreErrors)
	}
	if _, err := loadText(t, "- hosts: all\n  tasks:\n    - noop_t: {}\n      ignore_errors: \"{{ x | }}\"\n"); err == nil {
		t.Error("a broken template was accepted")
	}
}
