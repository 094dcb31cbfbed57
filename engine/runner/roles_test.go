package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	_ "nodeconverge/modules/template"
)

// writeTree writes files (path -> content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// roleTree is a playbook with a role as Ansible lays one out: defaults,
// vars, params, meta dependencies, an imported task file, a template and
// a file found in the role's templates/ and files/, a handler notified as
// "role : name" and one by a listen topic.
var roleTree = map[string]string{
	"site.yaml": `- hosts: all
  gather_facts: false
  vars:
    from_play: play
    overridden_by_role_vars: play
  roles:
    - role: prep
      greeting: "hello {{ inventory_hostname }}"
    - role: prep
      greeting: "hello {{ inventory_hostname }}"
    - role: skipped
      when: false
  tasks:
    - name: after the roles
      copy:
        dest: "{{ dir }}/{{ inventory_hostname }}.after"
        content: "{{ from_play }}\n"
`,
	"roles/prep/defaults/main.yml": `prep_dir: "{{ dir }}"
prep_name: "{{ inventory_hostname }}.prep"
greeting: default greeting
overridden_by_role_vars: default
`,
	"roles/prep/vars/main.yml": "overridden_by_role_vars: role vars\n",
	"roles/prep/meta/main.yml": `galaxy_info:
  author: x
dependencies:
  - role: dep
    dep_word: from meta
`,
	"roles/prep/tasks/main.yml": `- name: write the config
  template:
    src: prep.conf.j2
    dest: "{{ prep_dir }}/{{ prep_name }}"
  notify: "prep : reload prep"
- import_tasks: more.yml
  tags: [more]
`,
	"roles/prep/tasks/more.yml": `- name: the static file
  copy:
    src: static.txt
    dest: "{{ prep_dir }}/{{ inventory_hostname }}.static"
  notify: prep changed
`,
	"roles/prep/templates/prep.conf.j2": "{{ greeting }} {{ overridden_by_role_vars }} {{ from_play }}\n",
	"roles/prep/files/static.txt":       "static\n",
	"roles/prep/handlers/main.yml": `- name: reload prep
  copy:
    dest: "{{ prep_dir }}/{{ inventory_hostname }}.reloaded"
    content: "reloaded\n"
- name: also on change
  listen: prep changed
  copy:
    dest: "{{ prep_dir }}/{{ inventory_hostname }}.listened"
    content: "heard\n"
`,
	"roles/dep/tasks/main.yml": `- name: dependency first
  copy:
    dest: "{{ dir }}/{{ inventory_hostname }}.dep"
    content: "{{ dep_word }}\n"
`,
	"roles/skipped/tasks/main.yml": `- name: never
  copy:
    dest: "{{ dir }}/{{ inventory_hostname }}.never"
    content: "x\n"
`,
}

// TestRolesLikeAnsible: a play's roles run as Ansible runs them, with
// their variables at Ansible's precedence and their files found where
// Ansible finds them; a role used twice with the same params runs once.
func TestRolesLikeAnsible(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, roleTree)
	plays, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tk := range plays[0].Tasks {
		names = append(names, tk.DisplayName())
	}
	if got := strings.Join(names, " | "); got != "dep : dependency first | prep : write the config | prep : the static file | skipped : never | after the roles" {
		t.Errorf("tasks: %s", got)
	}
	if tags := plays[0].Tasks[2].Tags; len(tags) != 1 || tags[0] != "more" {
		t.Errorf("the import's tags: %v", tags)
	}
	for _, check := range []bool{true, false} {
		e := newEnv(t, "h1")
		run := e.run(plays, e.options(check))
		res := results(t, run)
		for k, st := range map[string]report.Status{
			"dependency first h1": report.Changed, "write the config h1": report.Changed, "the static file h1": report.Changed,
			"never h1": report.Skipped, "reload prep h1": report.Changed, "also on change h1": report.Changed,
		} {
			if tr := res[k]; tr == nil || tr.Status != st {
				t.Errorf("check=%v: %s: %+v, want %s", check, k, tr, st)
			}
		}
		if check {
			continue
		}
		for name, want := range map[string]string{
			"prep": "hello h1 role vars play\n", "static": "static\n", "dep": "from meta\n", "after": "play\n",
			"reloaded": "reloaded\n", "listened": "heard\n",
		} {
			if got, _ := e.read("h1", name); got != want {
				t.Errorf("h1.%s = %q, want %q", name, got, want)
			}
		}
		if _, ok := e.read("h1", "never"); ok {
			t.Error("the role with when: false ran")
		}
	}
}

// TestRoleErrorsAtRoleFile: what a role's files cannot run is reported
// at the role file's line and column, every problem at once.
func TestRoleErrorsAtRoleFile(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site.yaml": "- hosts: all\n  roles:\n    - bad\n    - missing\n",
		"roles/bad/tasks/main.yml": `- name: fine
  copy:
    dest: /etc/x
    content: x
- name: packages
  apt:
    name: containerd
- include_tasks: other.yml
`,
		"roles/bad/tasks/other.yml": "- name: typo\n  coppy:\n    dest: /etc/y\n",
	})
	_, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	if err == nil {
		t.Fatal("loaded")
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(dir, "roles/bad/tasks/main.yml") + `:6:3: module "apt" is not supported`,
		filepath.Join(dir, "roles/bad/tasks/other.yml") + `:2:3: unknown module "coppy"`,
		filepath.Join(dir, "site.yaml") + `:4:7: role "missing" not found`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
}

// TestEnvironment: a play's, a block's and a task's environment: reach
// command and shell (the task's winning per name); values are data.
func TestEnvironment(t *testing.T) {
	e := newEnv(t, "h1")
	plays := e.load(`- hosts: all
  gather_facts: false
  environment:
    FROM_PLAY: play
    WHO: play
  vars:
    proxy: "http://proxy:3128; rm -rf /"
  tasks:
    - block:
        - name: shell sees them
          shell: "echo \"$FROM_PLAY $WHO $HTTP_PROXY\" > {{ dir }}/{{ inventory_hostname }}.env"
          environment:
            WHO: task
        - name: command sees them
          command:
            argv: [sh, -c, 'echo "$FROM_PLAY $WHO $HTTP_PROXY" > "$0"', "{{ dir }}/{{ inventory_hostname }}.cmd"]
      environment:
        HTTP_PROXY: "{{ proxy }}"
`)
	run := e.run(plays, e.options(false))
	for _, tr := range run.Results {
		if tr.Status == report.Failed {
			t.Fatalf("%s: %s", tr.Task, tr.Msg)
		}
	}
	if got, _ := e.read("h1", "env"); got != "play task http://proxy:3128; rm -rf /\n" {
		t.Errorf("shell: %q", got)
	}
	if got, _ := e.read("h1", "cmd"); got != "play play http://proxy:3128; rm -rf /\n" {
		t.Errorf("command: %q", got)
	}
}

// TestIncludeVars: include_vars of a role's vars/ file makes its
// variables the host's from that task on (templates in them rendered).
func TestIncludeVars(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site.yaml":                "- hosts: all\n  gather_facts: false\n  roles:\n    - r\n",
		"roles/r/vars/family.yml":  "pkg_dir: \"{{ dir }}\"\nword: from vars file\n",
		"roles/r/tasks/main.yml":   "- name: vars\n  ansible.builtin.include_vars: family.yml\n- name: use\n  copy:\n    dest: \"{{ pkg_dir }}/{{ inventory_hostname }}.iv\"\n    content: \"{{ word }}\\n\"\n",
		"roles/bad/tasks/main.yml": "- include_vars: \"{{ ansible_os_family }}.yml\"\n",
		"bad.yaml":                 "- hosts: all\n  roles:\n    - bad\n",
	})
	plays, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, check := range []bool{true, false} {
		e := newEnv(t, "h1")
		run := e.run(plays, e.options(check))
		res := results(t, run)
		if tr := res["vars h1"]; tr == nil || tr.Status != report.OK {
			t.Errorf("check=%v: include_vars: %+v", check, tr)
		}
		if tr := res["use h1"]; tr == nil || tr.Status != report.Changed {
			t.Errorf("check=%v: use: %+v", check, tr)
		}
		if !check {
			if got, _ := e.read("h1", "iv"); got != "from vars file\n" {
				t.Errorf("h1.iv = %q", got)
			}
		}
	}
	if _, err := playbook.Load(filepath.Join(dir, "bad.yaml")); err == nil || !strings.Contains(err.Error(), "include_vars: no vars file matches {{ ansible_os_family }}.yml") {
		t.Errorf("a templated include_vars no file matches: %v", err)
	}
}
