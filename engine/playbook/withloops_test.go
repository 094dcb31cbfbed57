package playbook

import (
	"strings"
	"testing"

	"nodeconverge/engine/yamlx"
)

// TestWithLoops: with_dict and with_subelements load as the loop that gives
// Ansible's items (dict2items, subelements), a literal with_dict mapping
// as its key/value items; forms nodeconverge does not read are refused at
// their line.
func TestWithLoops(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - name: d
      noop_t: {}
      with_dict: "{{ sysctl | default({}) }}"
    - name: lit
      noop_t: {}
      with_dict:
        fs.inotify.max_user_instances: 512
        vm.swappiness: 1
    - name: sub
      noop_t: {}
      with_subelements:
        - "{{ sysctl_d }}"
        - settings
    - name: skip
      noop_t: {}
      with_subelements:
        - "{{ sysctl_d }}"
        - settings
        - skip_missing: true
`)
	if err != nil {
		t.Fatal(err)
	}
	tasks := plays[0].Tasks
	want := []string{"{{ (sysctl | default({})) | dict2items }}", "", "{{ (sysctl_d) | subelements('settings') }}", "{{ (sysctl_d) | subelements('settings', skip_missing=True) }}"}
	for i, w := range want {
		n := yamlx.Deref(tasks[i].Loop)
		if w != "" && (n == nil || n.Value != w) {
			t.Errorf("%s: loop %v, want %q", tasks[i].Name, n, w)
		}
	}
	lit := yamlx.Deref(tasks[1].Loop)
	if lit == nil || len(lit.Content) != 2 || yamlx.Deref(lit.Content[0]).Content[1].Value != "fs.inotify.max_user_instances" {
		t.Errorf("literal with_dict: %+v", lit)
	}
	for body, msg := range map[string]string{
		"with_dict: sysctl":                               "write the variable as a template",
		"with_dict: [a, b]":                               "with_dict takes one template",
		"with_subelements: [\"{{ l }}\"]":                 "a list of two terms",
		"with_subelements: [\"{{ l }}\", \"{{ k }}\"]":    "plain name of each item's sublist",
		"with_subelements: [\"{{ l }}\", k, {other: 1}]":  "the only flag is skip_missing",
		"loop: [1]\n      with_dict: \"{{ d }}\"":         "a task has one loop",
		"with_dict: \"{{ d }}\"\n      with_items: [1]":   "a task has one loop",
		"with_subelements: [\"{{ l | bad_filter }}\", k]": "bad_filter",
	} {
		_, err := loadText(t, "- hosts: all\n  tasks:\n    - noop_t: {}\n      "+body+"\n")
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want one saying %q", body, err, msg)
		}
	}
}
