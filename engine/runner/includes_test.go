package runner_test

import (
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// TestDynamicIncludes: include_tasks over a loop runs its file once per
// item, the item under loop_control's name; a file name templated from
// the host's variables runs, on each host, the file it renders to there;
// include_role over a loop runs the role once per item.
func TestDynamicIncludes(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site.yaml": `- hosts: all
  gather_facts: false
  vars:
    flavour: "{{ 'gpu' if inventory_hostname == 'h1' else 'cpu' }}"
  tasks:
    - name: per part
      include_tasks: "part-{{ part }}.yml"
      loop: [a, b]
      loop_control: {loop_var: part, index_var: n}
    - name: per flavour
      include_tasks: "setup-{{ flavour }}.yml"
    - include_role: {name: greet}
      loop: [x, y]
`,
		"part-a.yml":                 "- {name: part a, copy: {dest: \"{{ dir }}/{{ inventory_hostname }}.a\", content: \"{{ part }} {{ n }}\\n\"}}\n",
		"part-b.yml":                 "- {name: part b, copy: {dest: \"{{ dir }}/{{ inventory_hostname }}.b\", content: \"{{ part }} {{ n }}\\n\"}}\n",
		"setup-gpu.yml":              "- {name: gpu setup, copy: {dest: \"{{ dir }}/{{ inventory_hostname }}.setup\", content: \"gpu\\n\"}}\n",
		"setup-cpu.yml":              "- {name: cpu setup, copy: {dest: \"{{ dir }}/{{ inventory_hostname }}.setup\", content: \"cpu\\n\"}}\n",
		"roles/greet/tasks/main.yml": "- {name: greet, copy: {dest: \"{{ dir }}/{{ inventory_hostname }}.{{ item }}\", content: \"hi {{ item }}\\n\"}}\n",
	})
	plays, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "h1", "h2")
	run := e.run(plays, e.options(false))
	for _, tr := range run.Results {
		if tr.Status == report.Failed {
			t.Fatalf("%s on %s: %s", tr.Task, tr.Host, tr.Msg)
		}
	}
	for file, want := range map[string]string{
		"h1.a": "a 0\n", "h1.b": "b 1\n", "h1.setup": "gpu\n", "h2.setup": "cpu\n", "h1.x": "hi x\n", "h2.y": "hi y\n",
	} {
		host, name, _ := strings.Cut(file, ".")
		if got, _ := e.read(host, name); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if rc := run.Recap["h1"]; rc.Skipped != 0 || rc.Changed != 5 {
		t.Errorf("h1 recap %+v: the other flavour's task is not h1's: not counted", *rc)
	}
	for _, tr := range run.Results {
		if tr.Task == "cpu setup" && tr.Host == "h1" {
			t.Errorf("the other flavour's task is reported on h1: %+v", tr)
		}
	}
}

// TestDynamicIncludeRefusals: what an include loop cannot be expanded at
// load from is refused, at its file:line:col.
func TestDynamicIncludeRefusals(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site.yaml": `- hosts: all
  tasks:
    - include_tasks: "{{ item }}.yml"
      loop: "{{ parts }}"
    - include_tasks: "{{ item }}-{{ other }}.yml"
      loop: [a]
    - include_tasks: "nothing-{{ x }}.yml"
    - import_tasks: "{{ x }}.yml"
`,
	})
	_, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	for _, want := range []string{
		`site.yaml:4:13: loop on include_tasks: give the list itself`,
		`site.yaml:5:22: include_tasks: "{{ item }}-{{ other }}.yml" reads other`,
		`site.yaml:7:22: include_tasks: "nothing-{{ x }}.yml": no task file matches nothing-*.yml`,
		`site.yaml:8:21: import_tasks: "{{ x }}.yml": a templated file name is not supported`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// TestDynamicIncludeNoFile: a host whose templated include_tasks name
// renders to a file that is not there fails, as Ansible's include does
// ("Could not find or access"), instead of silently running none of the
// files read at load.
func TestDynamicIncludeNoFile(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site.yaml": `- hosts: all
  gather_facts: false
  vars:
    flavour: "{{ 'gpu' if inventory_hostname == 'h1' else 'tpu' }}"
  tasks:
    - name: per flavour
      include_tasks: "setup-{{ flavour }}.yml"
`,
		"setup-gpu.yml": "- {name: gpu setup, copy: {dest: \"{{ dir }}/{{ inventory_hostname }}.setup\", content: \"gpu\\n\"}}\n",
	})
	plays, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "h1", "h2")
	run := e.run(plays, e.options(false))
	if rc := run.Recap["h1"]; rc.Failed != 0 || rc.Changed != 1 {
		t.Errorf("h1 recap %+v: want its setup run", *rc)
	}
	rc := run.Recap["h2"]
	if rc.Failed != 1 {
		t.Errorf("h2 recap %+v: want it failed, its setup-tpu.yml missing", *rc)
	}
	var msgs []string
	for _, tr := range run.Results {
		if tr.Host == "h2" && tr.Status == report.Failed {
			msgs = append(msgs, tr.Msg)
		}
	}
	if !strings.Contains(strings.Join(msgs, "\n"), "setup-tpu.yml") {
		t.Errorf("h2's failure %q does not name the file it rendered to", msgs)
	}
}

// TestTemplatedIncludeVars: include_vars of a templated name, and of
// "{{ item }}" with with_first_found, sets the variables of the file the
// host picks (the first of the names that is a file found), as Ansible's.
func TestTemplatedIncludeVars(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site.yaml": `- hosts: all
  gather_facts: false
  vars:
    flavour: "{{ 'gpu' if inventory_hostname == 'h1' else 'cpu' }}"
  roles: [prep]
`,
		"roles/prep/tasks/main.yml": `- name: flavour vars
  include_vars: "{{ flavour }}.yml"
- name: first found vars
  include_vars: "{{ item }}"
  with_first_found:
    - "only-{{ flavour }}.yml"
    - default.yml
- name: what the host has
  copy: {dest: "{{ dir }}/{{ inventory_hostname }}.vars", content: "{{ kind }} {{ picked }}\n"}
`,
		"roles/prep/vars/gpu.yml":      "kind: gpu\n",
		"roles/prep/vars/cpu.yml":      "kind: cpu\n",
		"roles/prep/vars/only-gpu.yml": "picked: only-gpu\n",
		"roles/prep/vars/default.yml":  "picked: default\n",
	})
	plays, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "h1", "h2")
	run := e.run(plays, e.options(false))
	for _, tr := range run.Results {
		if tr.Status == report.Failed {
			t.Fatalf("%s on %s: %s", tr.Task, tr.Host, tr.Msg)
		}
	}
	for host, want := range map[string]string{"h1": "gpu only-gpu\n", "h2": "cpu default\n"} {
		if got, _ := e.read(host, "vars"); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
	if rc := run.Recap["h2"]; rc.OK != 2 || rc.Skipped != 0 {
		t.Errorf("h2 recap %+v: want one ok per include_vars, nothing skipped", *rc)
	}
}

// TestUnreadFileNotShown: the human output announces no task of a
// templated include's file that no host reads, as Ansible's shows none.
func TestUnreadFileNotShown(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site.yaml": `- hosts: all
  gather_facts: false
  vars: {flavour: gpu}
  tasks:
    - include_tasks: "setup-{{ flavour }}.yml"
`,
		"setup-gpu.yml": "- {name: gpu setup, copy: {dest: \"{{ dir }}/{{ inventory_hostname }}.setup\", content: \"gpu\\n\"}}\n",
		"setup-cpu.yml": "- {name: cpu setup, copy: {dest: \"{{ dir }}/{{ inventory_hostname }}.setup\", content: \"cpu\\n\"}}\n",
	})
	plays, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "h1")
	var out strings.Builder
	o := e.options(false)
	o.Observer = &report.Human{W: &out}
	e.run(plays, o)
	if !strings.Contains(out.String(), "gpu setup") || strings.Contains(out.String(), "cpu setup") {
		t.Errorf("output shows the unread file's task, or not the read one's:\n%s", out.String())
	}
}
