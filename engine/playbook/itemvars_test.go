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

// TestVarsAsList: play and task vars may be a list of mappings, merged in
// order, as Ansible reads them; anything else in the list is refused.
func TestVarsAsList(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  vars:
    - project: foo
    - svc: [{name: "{{ project }}-app"}]
    - project: bar
  tasks:
    - noop_t: {}
      vars: [{a: 1}, {b: 2}]
`)
	if err != nil {
		t.Fatal(err)
	}
	if v := plays[0].Vars; v["project"] != "bar" || v["svc"] == nil {
		t.Errorf("play vars %v", v)
	}
	if v := plays[0].Tasks[0].Vars; v["a"] != 1 || v["b"] != 2 {
		t.Errorf("task vars %v", v)
	}
	if _, err := loadText(t, "- hosts: all\n  vars: [a, b]\n  tasks: []\n"); err == nil {
		t.Error("a list of names was accepted as vars")
	}
}
