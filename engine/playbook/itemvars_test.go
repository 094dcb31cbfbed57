package playbook

import (
	"testing"
)

// TestTaskVarsPerItem: a task var that reads the loop variable (directly,
// or through another task var) is rendered per item, as Ansible renders
// it; before, resolving the task's variables for the host failed on the
// undefined loop variable.
func TestTaskVarsPerItem(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - copy_t:
        dest: "/etc/{{ path }}"
      vars:
        name: "{{ unit.name }}-{{ idx }}"
        path: "{{ name }}.conf"
        fixed: "{{ base }}"
      loop: [{name: a}, {name: b}]
      loop_control: {loop_var: unit, index_var: idx}
`)
	if err != nil {
		t.Fatal(err)
	}
	task := plays[0].Tasks[0]
	if per := task.itemVars(); !per["name"] || !per["path"] || per["fixed"] {
		t.Fatalf("per-item vars %v, want name and path", per)
	}
	vars, err := task.ResolveFor(MergeVars(map[string]any{"base": "b"}, task.Vars), nil)
	if err != nil {
		t.Fatalf("resolve for the host: %v", err)
	}
	args, err := task.Render(vars)
	if err != nil {
		t.Fatal(err)
	}
	la, ok := args.(*LoopArgs)
	if !ok || len(la.Args) != 2 {
		t.Fatalf("render: %#v", args)
	}
	for i, want := range []string{"/etc/a-0.conf", "/etc/b-1.conf"} {
		if got := la.Args[i].(*copyArgs).Dest; got != want {
			t.Errorf("item %d: dest %q, want %q", i, got, want)
		}
	}
}
