package runner_test

import (
	"path/filepath"
	"testing"

	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// TestFileLookupsInRoles: a role's with_first_found picks the first file
// of its list that the role has (in templates/ for template, files/ for
// copy), lookup('file') reads the role's files/ and lookup('template')
// renders its templates/, with the host's variables.
func TestFileLookupsInRoles(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site.yaml": `- hosts: all
  gather_facts: false
  vars: {flavour: gpu}
  roles: [prep]
`,
		"roles/prep/tasks/main.yml": `- name: the flavour's config
  template:
    src: "{{ item }}"
    dest: "{{ dir }}/{{ inventory_hostname }}.conf"
  with_first_found:
    - "{{ flavour }}.conf.j2"
    - default.conf.j2
- name: the key and the banner
  copy:
    dest: "{{ dir }}/{{ inventory_hostname }}.key"
    content: "{{ lookup('file', 'key.pub') }}|{{ lookup('template', 'banner.j2') }}"
- name: a fallback file
  copy:
    src: "{{ item }}"
    dest: "{{ dir }}/{{ inventory_hostname }}.fallback"
  with_first_found:
    files: [missing.txt, fallback.txt]
`,
		"roles/prep/templates/gpu.conf.j2":     "gpu on {{ inventory_hostname }}\n",
		"roles/prep/templates/default.conf.j2": "default\n",
		"roles/prep/templates/banner.j2":       "hi {{ inventory_hostname }}",
		"roles/prep/files/key.pub":             "ssh-ed25519 AAAA\n",
		"roles/prep/files/fallback.txt":        "fallback\n",
	})
	plays, err := playbook.Load(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "h1")
	run := e.run(plays, e.options(false))
	for _, tr := range run.Results {
		if tr.Status == report.Failed {
			t.Fatalf("%s: %s", tr.Task, tr.Msg)
		}
	}
	for name, want := range map[string]string{"conf": "gpu on h1\n", "key": "ssh-ed25519 AAAA|hi h1", "fallback": "fallback\n"} {
		if got, _ := e.read("h1", name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
