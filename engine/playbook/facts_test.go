package playbook

import (
	"reflect"
	"strings"
	"testing"
)

// TestFactsRead: a play without gather_facts gathers (Ansible's
// default); which facts each task reads is known at load, through
// conditions, ansible_facts keys and the templates of the vars it reads.
func TestFactsRead(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  vars:
    arch: "{{ ansible_architecture }}"
    pkgdir: "/opt/{{ arch }}"
  tasks:
    - name: debian only
      when: ansible_os_family == "Debian" and ansible_facts['distribution_major_version'] | int >= 12
      noop_t: {}
    - name: through vars
      copy_t:
        dest: "{{ pkgdir }}/x"
        content: "{{ ansible_facts.kernel }}"
    - name: none
      copy_t:
        dest: /etc/x
        content: "{{ ansible_check_mode }} {{ ansible_host | default('') }} {{ ansible_become_user | default('') }}"
    - name: registered is not a fact
      noop_t: {}
      register: ansible_thing
- hosts: all
  gather_facts: no
  tasks:
    - name: x
      noop_t: {}
`)
	if err != nil {
		t.Fatal(err)
	}
	if !plays[0].GatherFacts || plays[1].GatherFacts {
		t.Errorf("GatherFacts = %v, %v; want true (no key), false", plays[0].GatherFacts, plays[1].GatherFacts)
	}
	want := [][]string{{"os_family", "distribution_major_version"}, {"architecture", "kernel"}, nil, nil}
	for i, tk := range plays[0].Tasks {
		got := append([]string(nil), tk.Facts...)
		if len(got) == 0 {
			got = nil
		}
		if !sameSet(got, want[i]) {
			t.Errorf("task %q: Facts = %v, want %v", tk.Name, got, want[i])
		}
	}
	if _, err := loadText(t, "- hosts: all\n  gather_subset: [hardwar]\n  tasks: []\n"); err == nil || !strings.Contains(err.Error(), `"hardwar" is not a subset`) {
		t.Errorf("a misspelt gather_subset: %v", err)
	}
}

func sameSet(a, b []string) bool {
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	n := map[string]bool{}
	for _, x := range b {
		n[x] = true
	}
	return reflect.DeepEqual(m, n)
}

// TestResolve: templated variables render when read, through each
// other, keeping types; data is never rendered; a loop is an error.
func TestResolve(t *testing.T) {
	vars := map[string]any{
		"base": "/etc/containerd", "dir": "{{ base }}/conf.d", "files": []any{"{{ dir }}/a.toml", "b"},
		"n": "{{ 2 + 3 }}", "reg": map[string]any{"stdout": "{{ evil }}"}, "loop1": "{{ loop2 }}", "loop2": "{{ loop1 }}",
		"unused": "{{ undefined_thing }}",
	}
	got, err := Resolve(vars, []string{"files", "n", "reg"}, map[string]bool{"reg": true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got["files"], []any{"/etc/containerd/conf.d/a.toml", "b"}) || got["n"] != 5 {
		t.Errorf("files = %#v, n = %#v", got["files"], got["n"])
	}
	if got["reg"].(map[string]any)["stdout"] != "{{ evil }}" || vars["dir"] != "{{ base }}/conf.d" {
		t.Errorf("data was rendered, or vars changed: %v %v", got["reg"], vars["dir"])
	}
	if _, err := Resolve(vars, []string{"loop1"}, nil); err == nil || !strings.Contains(err.Error(), "recursive loop") {
		t.Errorf("a loop of templates: %v", err)
	}
	all := ResolveAll(vars, nil)
	if all["dir"] != "/etc/containerd/conf.d" {
		t.Errorf("ResolveAll: dir = %v", all["dir"])
	}
	if _, ok := all["unused"]; ok {
		t.Errorf("ResolveAll kept a variable that does not render")
	}
}

// TestLoopControlAndOmit: loop_control's loop_var and index_var name the
// item and its index; an argument that renders to omit is left out.
func TestLoopControlAndOmit(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - name: each
      copy_t:
        dest: "/etc/{{ entry.name }}-{{ idx }}"
        mode: "{{ entry.mode | default(omit) }}"
      loop: [{name: a, mode: "0600"}, {name: b}]
      loop_control:
        loop_var: entry
        index_var: idx
        label: "{{ entry.name }}"
      when: entry.name != 'c'
`)
	if err != nil {
		t.Fatal(err)
	}
	a, err := plays[0].Tasks[0].Render(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	la := a.(*LoopArgs)
	if len(la.Args) != 2 {
		t.Fatalf("items: %+v", la)
	}
	first, second := la.Args[0].(*copyArgs), la.Args[1].(*copyArgs)
	if first.Dest != "/etc/a-0" || first.Mode != "0600" || second.Dest != "/etc/b-1" || second.Mode != "0644" {
		t.Errorf("rendered: %+v, %+v (an omitted mode keeps the module's default)", first, second)
	}
	if _, err := loadText(t, "- hosts: all\n  tasks:\n    - noop_t: {}\n      loop: [1]\n      loop_control:\n        loop_vr: x\n"); err == nil || !strings.Contains(err.Error(), `unknown key "loop_vr"`) {
		t.Errorf("a misspelt loop_control key: %v", err)
	}
}
