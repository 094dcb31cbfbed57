package playbook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/jinja"
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
		if tk.Meta != "" {
			// A dynamic include's marker (Task.Meta) runs no module.
			continue
		}
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
	// What the choices condition decides is TestArgSpecChoices'.
	if len(args.That) != 2 || args.That[0] != "unit_name is defined" || !strings.HasPrefix(args.That[1], `unit_state is not defined or (unit_state | string) in ["started", "stopped"]`) || !args.Quiet {
		t.Errorf("validation asserts %q (quiet %v), want unit_name required and unit_state's choices", args.That, args.Quiet)
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

// TestArgSpecChoices: a choices condition holds as Ansible's argument
// validation decides: a value among the choices, a list whose every
// element is one (a list option with choices), a boolean among boolean
// choices; an undefined option is not checked.
func TestArgSpecChoices(t *testing.T) {
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	var spec yaml.Node
	if err := yaml.Unmarshal([]byte("state: {choices: [started, stopped]}\nflag: {type: bool, choices: [true, false]}\n"), &spec); err != nil {
		t.Fatal(err)
	}
	conds := argSpecConditions(spec.Content[0], str)
	if len(conds) != 2 {
		t.Fatalf("conditions %v", conds)
	}
	for _, c := range []struct {
		cond int
		vars map[string]any
		want bool
	}{
		{0, map[string]any{"state": "started"}, true},
		{0, map[string]any{"state": "gone"}, false},
		{0, map[string]any{}, true},
		{0, map[string]any{"state": []any{"started", "stopped"}}, true},
		{0, map[string]any{"state": []any{"started", "gone"}}, false},
		{1, map[string]any{"flag": true}, true},
		{1, map[string]any{"flag": false}, true},
		{1, map[string]any{"flag": "maybe"}, false},
	} {
		e, err := jinja.ParseExpr(conds[c.cond].Value)
		if err != nil {
			t.Fatalf("%s: %v", conds[c.cond].Value, err)
		}
		v, err := e.Eval(c.vars)
		if err != nil || v != c.want {
			t.Errorf("%s with %v = %v, %v; want %v", conds[c.cond].Value, c.vars, v, err, c.want)
		}
	}
}
