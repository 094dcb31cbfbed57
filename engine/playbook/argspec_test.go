package playbook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
)

type assertArgs struct {
	That  []string `yaml:"that"`
	Quiet bool     `yaml:"quiet"`
}

func (assertArgs) Validate() error { return nil }

func init() {
	module.Register(module.Registration{Name: "assert", Module: fake{func() module.Args { return &assertArgs{} }}})
}

// TestRoleArgumentSpec: a role with meta/argument_specs.yml gets Ansible's
// validation task first (after its dependencies), for the entry point it is
// entered by, tagged always, asserting the required options and choices; a
// role entered by an entry point the spec does not describe gets none.
func TestRoleArgumentSpec(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"roles/unit/meta/argument_specs.yml": `argument_specs:
  main:
    short_description: Main entry point
    options:
      unit_name: {type: str, required: true}
      unit_state: {type: str, choices: [started, stopped]}
      unit_enabled: {type: bool, default: true}
`,
		"roles/unit/tasks/main.yml":  "- name: own\n  noop_t: {}\n",
		"roles/unit/tasks/other.yml": "- name: other\n  noop_t: {}\n",
		"play.yaml": `- hosts: all
  roles:
    - unit
  tasks:
    - include_role: {name: unit, tasks_from: other}
`,
	}
	for p, body := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plays, err := Load(filepath.Join(dir, "play.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tk := range plays[0].Tasks {
		names = append(names, tk.Module+" "+tk.DisplayName())
	}
	want := []string{
		"assert unit : Validating arguments against arg spec 'main' - Main entry point",
		"noop_t unit : own",
		"noop_t unit : other",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tasks:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	v := plays[0].Tasks[0]
	if len(v.Tags) != 1 || v.Tags[0] != "always" {
		t.Errorf("validation task tags %v, want [always]", v.Tags)
	}
	var args assertArgs
	if err := v.Args.Decode(&args); err != nil {
		t.Fatal(err)
	}
	wantThat := []string{"unit_name is defined", `unit_state is not defined or (unit_state | string) in ["started", "stopped"]`}
	if strings.Join(args.That, "|") != strings.Join(wantThat, "|") || !args.Quiet {
		t.Errorf("validation asserts %q (quiet %v), want %q", args.That, args.Quiet, wantThat)
	}
	if !strings.HasSuffix(v.Pos.File, "argument_specs.yml") {
		t.Errorf("validation task is at %s, want the spec file", v.Pos)
	}
}

// TestSelectTagsDynamicInclude: a task tagged always that came in through
// a dynamic include runs only when the include itself is selected, as in
// Ansible, which never reads the tasks of an include its tags skip.
func TestSelectTagsDynamicInclude(t *testing.T) {
	inc := &Include{Name: "Include role"}
	tagged := &Include{Name: "Include tagged", Tags: []string{"checks"}}
	p := &Play{Tasks: []*Task{
		{Name: "validate", Tags: []string{"always"}, IncludedBy: inc},
		{Name: "own", IncludedBy: inc},
		{Name: "validate tagged", Tags: []string{"always"}, IncludedBy: tagged},
		{Name: "plain always", Tags: []string{"always"}},
	}}
	var got []string
	for _, tk := range SelectTags([]*Play{p}, []string{"checks"}, nil)[0].Tasks {
		got = append(got, tk.Name)
	}
	if want := "validate tagged,plain always"; strings.Join(got, ",") != want {
		t.Errorf("--tags checks selected %v, want %s", got, want)
	}
}
