package playbook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

// The real modules live in modules/ and are not imported here; these small
// ones exercise the loader through the real registry under test-only names.

type ownership struct {
	Owner string `yaml:"owner,omitempty"`
}

type line struct {
	Key   string `yaml:"key"`
	Value string `yaml:"value"`
}

type copyArgs struct {
	Dest      string   `yaml:"dest"`
	Content   string   `yaml:"content,omitempty"`
	Mode      string   `yaml:"mode,omitempty"`
	Port      int      `yaml:"port,omitempty"`
	Files     []string `yaml:"files,omitempty"`
	Lines     []line   `yaml:"lines,omitempty"`
	Backup    bool     `yaml:"backup"`
	ownership `yaml:",inline"`
}

func (a *copyArgs) Validate() error {
	if !strings.HasPrefix(a.Dest, "/") {
		return fmt.Errorf("dest %q must be an absolute path", a.Dest)
	}
	return nil
}

type commandArgs struct {
	Cmd     string   `yaml:"cmd"`
	Argv    []string `yaml:"argv"`
	Creates string   `yaml:"creates"`
}

func (a *commandArgs) Validate() error {
	if (a.Cmd == "") == (len(a.Argv) == 0) {
		return errors.New("give exactly one of cmd or argv")
	}
	return nil
}

type noopArgs struct{}

func (noopArgs) Validate() error { return nil }

type fake struct{ newArgs func() module.Args }

func (f fake) NewArgs() module.Args { return f.newArgs() }
func (fake) Check(context.Context, transport.Reader, module.Args) (*module.Plan, error) {
	return &module.Plan{}, nil
}
func (fake) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}

func init() {
	module.Register(module.Registration{Name: "copy_t", Module: fake{func() module.Args { return &copyArgs{Mode: "0644", Backup: true} }}})
	module.Register(module.Registration{Name: "command_t", Module: fake{func() module.Args { return &commandArgs{} }}})
	module.Register(module.Registration{Name: "noop_t", Module: fake{func() module.Args { return noopArgs{} }}})
	// shell_t is a stand-in for the shell module: its cmd renders each
	// substitution shell-quoted.
	module.Register(module.Registration{Name: "shell_t", Module: fake{func() module.Args { return &commandArgs{} }}, ShellArgs: []string{"cmd"}})
}

// loadText writes a playbook to a fresh play.yaml and loads it.
func loadText(t *testing.T, body string) ([]*Play, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "play.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(p)
}

func loadGood(t *testing.T) []*Play {
	t.Helper()
	plays, err := Load("testdata/good/site.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return plays
}

func TestLoadGood(t *testing.T) {
	plays := loadGood(t)
	if len(plays) != 2 {
		t.Fatalf("got %d plays, want 2", len(plays))
	}
	p := plays[0]
	if p.Name != "containerd for GPU nodes" || p.Hosts != "gpu:!omen2" {
		t.Errorf("name/hosts = %q/%q", p.Name, p.Hosts)
	}
	if p.Become == nil || !*p.Become {
		t.Errorf("become = %v, want true", p.Become)
	}
	if p.Serial != (Serial{Percent: 30}) {
		t.Errorf("serial = %+v", p.Serial)
	}
	if p.MaxFailPercentage == nil || *p.MaxFailPercentage != 25 {
		t.Errorf("max_fail_percentage = %v", p.MaxFailPercentage)
	}
	if want := (Pos{File: "testdata/good/site.yaml", Line: 2, Col: 3}); p.Pos != want {
		t.Errorf("play pos = %v, want %v", p.Pos, want)
	}
	var got []string
	for _, task := range p.Tasks {
		got = append(got, fmt.Sprintf("%s|%s|%v|%v|%s|%v", task.Name, task.Module, task.Notify, task.Tags, task.Pos, task.Args != nil))
	}
	want := []string{
		"nvidia drop-in|copy_t|[restart containerd]|[containerd gpu]|testdata/good/site.yaml:16:7|true",
		"free-form command|command_t|[]|[check]|testdata/good/site.yaml:30:7|true",
		"no arguments|noop_t|[]|[]|testdata/good/site.yaml:33:7|false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	if len(p.Handlers) != 2 || !p.Handlers[0].Handler || p.Handlers[1].Name != "check cri" {
		t.Errorf("handlers = %+v", p.Handlers)
	}
	if plays[1].Hosts != "nuc1,omen" || plays[1].Serial != (Serial{Count: 2}) || plays[1].Become != nil {
		t.Errorf("second play = %+v", plays[1])
	}
}

func TestRender(t *testing.T) {
	p := loadGood(t)[0]
	vars := MergeVars(map[string]any{"port": 22, "inventory_hostname": "omen"}, p.Vars, map[string]any{"drop_in_dir": "/srv/conf.d"})
	a, err := p.Tasks[0].Render(vars)
	if err != nil {
		t.Fatal(err)
	}
	want := &copyArgs{
		Dest:      "/srv/conf.d/99-nvidia.toml",
		Content:   "BinaryName = \"/usr/local/nvidia/toolkit/nvidia-container-runtime\"\n",
		Mode:      "0644",
		Port:      8080,
		Files:     []string{"a", "b"},
		Lines:     []line{{Key: "runtime", Value: "nvidia"}},
		Backup:    true,
		ownership: ownership{Owner: "root"},
	}
	if diff := cmp.Diff(want, a, cmp.AllowUnexported(copyArgs{})); diff != "" {
		t.Errorf("Render (-want +got):\n%s", diff)
	}
	// Render must leave the task as loaded: hosts render it concurrently.
	if got := p.Tasks[0].Args.Content[1].Value; got != "{{ drop_in_dir }}/99-nvidia.toml" {
		t.Errorf("task args changed by Render: %q", got)
	}
	c, err := p.Tasks[1].Render(vars)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&commandArgs{Cmd: "containerd config dump"}, c); diff != "" {
		t.Errorf("free-form command (-want +got):\n%s", diff)
	}
	if _, err := p.Tasks[2].Render(vars); err != nil {
		t.Errorf("task without args: %v", err)
	}
}

func TestRenderTypes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pb.yaml")
	src := `- hosts: all
  tasks:
    - name: t
      copy_t:
        dest: "/x/{{ n }}-{{ b }}-{{ list }}"
        port: "{{ a }}{{ n }}"
        mode: "{{ n }}"
        content: "{{ empty }}"
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	plays, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := plays[0].Tasks[0].Render(map[string]any{"n": 7, "b": true, "list": []any{"x", 1}, "a": "8", "empty": ""})
	if err != nil {
		t.Fatal(err)
	}
	// Jinja2 as Ansible renders it: Python's True and list repr.
	want := &copyArgs{Dest: "/x/7-True-['x', 1]", Port: 87, Mode: "7", Backup: true}
	if diff := cmp.Diff(want, a, cmp.AllowUnexported(copyArgs{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRenderErrors(t *testing.T) {
	p := loadGood(t)[0]
	base := p.Vars
	tests := []struct {
		name  string
		task  int
		vars  map[string]any
		want  string
		isErr bool
	}{
		{"undefined", 0, MergeVars(base, map[string]any{"drop_in_dir": nil}), "", false},
		{"undefined with suggestion", 0, withoutKey(MergeVars(base, map[string]any{"drop_in_dr": "/x"}), "drop_in_dir"),
			`testdata/good/site.yaml:18:15: undefined variable "drop_in_dir" (did you mean "drop_in_dr"?)`, true},
		{"missing nested key", 0, MergeVars(base, map[string]any{"runtime": map[string]any{"name": "x", "bin": "y"}}),
			`testdata/good/site.yaml:19:18: undefined variable "runtime.binary": runtime has no key "binary"`, true},
		{"wrong type after substitution", 0, MergeVars(base, map[string]any{"port": "http"}),
			`testdata/good/site.yaml:22:15: task "nvidia drop-in": copy_t: wrong type: cannot use the string "http" as int`, true},
		{"validate", 0, MergeVars(base, map[string]any{"drop_in_dir": "relative"}),
			`testdata/good/site.yaml:16:7: task "nvidia drop-in": copy_t: dest "relative/99-nvidia.toml" must be an absolute path`, true},
	}
	for _, tt := range tests {
		_, err := p.Tasks[tt.task].Render(tt.vars)
		if !tt.isErr {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: want error %q", tt.name, tt.want)
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: %T is not *Error", tt.name, err)
		}
		if !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s:\n got  %q\n want %q", tt.name, err, tt.want)
		}
	}
}

func withoutKey(m map[string]any, k string) map[string]any {
	delete(m, k)
	return m
}

func TestBadCorpus(t *testing.T) {
	tests := []struct {
		file, pos, phrase string
	}{
		{"tab.yaml", "3:1", "tab"},
		{"not_list.yaml", "1:1", "a playbook must be a list of plays"},
		{"unknown_play_key.yaml", "2:3", `unknown play key "hostss" (did you mean hosts?)`},
		{"two_modules.yaml", "6:7", `task "both" has two modules, "copy_t" and "command_t"`},
		{"no_module.yaml", "3:7", `task "nothing to run" has no module: add one of assert, command, command_t, copy_t, noop_t`},
		{"unknown_module.yaml", "4:7", `unknown module "coppy" (did you mean copy_t?)`},
		{"unknown_arg.yaml", "5:9", `task "write": copy_t: unknown argument "dset" (did you mean dest?)`},
		{"wrong_type.yaml", "6:15", `task "write": copy_t: argument "mode": wrong type: cannot use a list as string`},
		{"notify_unknown.yaml", "8:11", `notify: no handler named "restart containrd" (did you mean "restart containerd"?)`},
		{"serial_abc.yaml", "2:11", `serial: "abc" is not a number of hosts`},
		{"max_fail_x.yaml", "2:24", `max_fail_percentage: "x" is not a number`},
		{"fact_unknown.yaml", "3:7", `task "address" reads the fact ansible_default_ipv4, which nodeconverge does not gather (it gathers architecture, `},
		{"fact_subset.yaml", "6:7", `task "memory" reads the fact ansible_memtotal_mb, which the play's gather_subset leaves out (it is in the "hardware" subset)`},
		{"unknown_task_key.yaml", "6:7", `unknown task key "notfy" (did you mean notify?)`},
		{"template_filter.yaml", "5:15", `unknown filter "lowre" (did you mean lower?)`},
		{"unquoted_template.yaml", "6:16", "must be quoted"},
		{"validate_static.yaml", "3:7", `copy_t: dest "tmp/x" must be an absolute path`},
		{"nested_unknown.yaml", "8:13", `unknown argument "lines[0].vlaue" (did you mean value?)`},
		{"handler_no_name.yaml", "4:7", "handler needs a name"},
		{"no_hosts.yaml", "1:3", `play "forgot hosts" has no hosts`},
		{"serial_list.yaml", "2:11", "a list of batch sizes is not supported"},
		{"play_scalar.yaml", "2:3", "a play must be a mapping"},
	}
	for _, tt := range tests {
		path := filepath.Join("testdata/bad", tt.file)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: want error", tt.file)
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: %T is not *Error: %v", tt.file, err, err)
		}
		if want := path + ":" + tt.pos + ": "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %q does not start with %q", tt.file, err, want)
		}
		if !strings.Contains(err.Error(), tt.phrase) {
			t.Errorf("%s: error %q does not contain %q", tt.file, err, tt.phrase)
		}
	}
}

func TestAliasBlowupRefused(t *testing.T) {
	src := "- hosts: all\n  tasks:\n    - copy_t:\n        dest: /x\n        files: &a0 [\"{{ x }}\", x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i <= 8; i++ {
		src += fmt.Sprintf("        f%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	_, err := load("blowup.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("want a size error, got %v", err)
	}
}

func TestRenderConcurrent(t *testing.T) {
	task := loadGood(t)[0].Tasks[0]
	vars := loadGood(t)[0].Vars
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func(i int) {
			a, err := task.Render(MergeVars(vars, map[string]any{"port": i}))
			if err == nil && a.(*copyArgs).Port != i {
				err = fmt.Errorf("host %d got port %d", i, a.(*copyArgs).Port)
			}
			errs <- err
		}(i)
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestBatches(t *testing.T) {
	tests := []struct {
		serial Serial
		n      int
		want   [][]int
	}{
		{Serial{}, 3, [][]int{{0, 1, 2}}},
		{Serial{Count: 2}, 5, [][]int{{0, 1}, {2, 3}, {4}}},
		{Serial{Count: 9}, 2, [][]int{{0, 1}}},
		{Serial{Percent: 30}, 10, [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}}},
		{Serial{Percent: 30}, 4, [][]int{{0}, {1}, {2}, {3}}}, // 1.2 rounds down to 1
		{Serial{Percent: 10}, 3, [][]int{{0}, {1}, {2}}},      // 0.3 becomes at least 1
		{Serial{Percent: 50}, 5, [][]int{{0, 1}, {2, 3}, {4}}},
		{Serial{Count: 1}, 0, nil},
	}
	for _, tt := range tests {
		p := &Play{Serial: tt.serial}
		if diff := cmp.Diff(tt.want, p.Batches(tt.n)); diff != "" {
			t.Errorf("%+v n=%d (-want +got):\n%s", tt.serial, tt.n, diff)
		}
	}
}

func TestMergeVars(t *testing.T) {
	host := map[string]any{"a": "host", "b": "host", "m": map[string]any{"x": 1}}
	play := map[string]any{"b": "play", "m": map[string]any{"y": 2}}
	got := MergeVars(host, nil, play, map[string]any{"c": "extra"})
	want := map[string]any{"a": "host", "b": "play", "m": map[string]any{"y": 2}, "c": "extra"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if host["b"] != "host" {
		t.Error("MergeVars modified a layer")
	}
}

func TestParseExtraVars(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "extra.yaml")
	if err := os.WriteFile(file, []byte("from_file: 1\nlist: [a]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ParseExtraVars([]string{"a=1", `b="two words" c=`, `{"j": true, "a": "json"}`, "@" + file, "{y: 2}", "z: [1]"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": "json", "b": "two words", "c": "", "j": true, "from_file": 1, "list": []any{"a"}, "y": 2, "z": []any{1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("- a\n- b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"novalue":          `"novalue" is not key=value`,
		"1x=2":             "not a valid variable name",
		"@" + bad:          bad + ":1:1: extra vars must be a mapping",
		"@/does/not/exist": "read extra vars",
		"{a: [}":           "-e:1:",
	} {
		_, err := ParseExtraVars([]string{in})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseExtraVars(%q) = %v, want error containing %q", in, err, want)
		}
	}
}

func TestArgFields(t *testing.T) {
	got := argFields(reflect.TypeOf(&copyArgs{}))
	var names []string
	for k := range got {
		names = append(names, k)
	}
	want := []string{"backup", "content", "dest", "files", "lines", "mode", "owner", "port"}
	if diff := cmp.Diff(want, sortStrings(names)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func sortStrings(s []string) []string {
	out := append([]string{}, s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func FuzzLoad(f *testing.F) {
	for _, p := range []string{"testdata/bad/notify_unknown.yaml", "testdata/bad/nested_unknown.yaml", "testdata/bad/two_modules.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("- hosts: all\n  tasks:\n    - copy_t: &a {dest: \"{{ x }}\", lines: [*a]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		plays, err := load("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, p := range plays {
			p.Batches(7)
			for _, task := range append(p.Tasks, p.Handlers...) {
				_, _ = task.Render(map[string]any{"x": "/y", "n": 1})
			}
		}
	})
}

// TestTaskTimeout: `timeout:` is whole seconds, as in Ansible; anything
// else is refused at its position.
func TestTaskTimeout(t *testing.T) {
	load := func(v string) ([]*Play, error) {
		return loadText(t, "- hosts: all\n  tasks:\n    - name: x\n      timeout: "+v+"\n      noop_t: {}\n")
	}
	plays, err := load("30")
	if err != nil {
		t.Fatal(err)
	}
	if got := plays[0].Tasks[0].Timeout; got != 30*time.Second {
		t.Errorf("timeout = %s, want 30s", got)
	}
	for _, bad := range []string{"0", "-1", "5m", "1.5", "[1]"} {
		if _, err := load(bad); err == nil || !strings.Contains(err.Error(), "timeout") || !strings.Contains(err.Error(), ":4:") {
			t.Errorf("timeout: %s: err = %v, want refused at its line", bad, err)
		}
	}
}

// TestNoLog: `no_log:` is a boolean on a task or a play (its tasks and
// handlers inherit it unless they say otherwise); anything else, a
// template included, is refused at its position.
func TestNoLog(t *testing.T) {
	load := func(play, task string) ([]*Play, error) {
		return loadText(t, "- hosts: all\n"+play+"  tasks:\n    - name: x\n"+task+"      noop_t: {}\n    - name: y\n      noop_t: {}\n"+
			"  handlers:\n    - name: h\n      noop_t: {}\n")
	}
	plays, err := load("", "      no_log: true\n")
	if err != nil {
		t.Fatal(err)
	}
	if p := plays[0]; !p.Tasks[0].NoLog || p.Tasks[1].NoLog || p.Handlers[0].NoLog {
		t.Errorf("task no_log: got %v %v %v, want true false false", p.Tasks[0].NoLog, p.Tasks[1].NoLog, p.Handlers[0].NoLog)
	}
	plays, err = load("  no_log: yes\n", "      no_log: false\n")
	if err != nil {
		t.Fatal(err)
	}
	if p := plays[0]; p.Tasks[0].NoLog || !p.Tasks[1].NoLog || !p.Handlers[0].NoLog {
		t.Errorf("play no_log: got %v %v %v, want false true true", p.Tasks[0].NoLog, p.Tasks[1].NoLog, p.Handlers[0].NoLog)
	}
	for _, bad := range []string{"maybe", `"{{ hide }}"`, "[true]", "1"} {
		_, err := load("", "      no_log: "+bad+"\n")
		if err == nil || !strings.Contains(err.Error(), "no_log must be true or false") || !strings.Contains(err.Error(), ":4:") {
			t.Errorf("no_log: %s: err = %v, want refused at its line", bad, err)
		}
	}
	if _, err := load("  no_log: nope\n", ""); err == nil || !strings.Contains(err.Error(), "no_log must be true or false") {
		t.Errorf("play no_log: nope: err = %v", err)
	}
	if _, err := load("", "      no_log: \"{{ hide }}\"\n"); err == nil || !strings.Contains(err.Error(), "templates are not supported") {
		t.Errorf("templated no_log: err = %v", err)
	}
}

// TestEveryProblemAtOnce: a playbook written for Ansible with five
// different unsupported things (a play's roles, two modules, two task
// keywords) and two typos is refused with all seven, each at its
// file:line:col, with the nodeconverge way where there is one, and in
// the order of the file.
func TestEveryProblemAtOnce(t *testing.T) {
	path := "testdata/bad/five_unsupported.yaml"
	_, err := Load(path)
	if err == nil {
		t.Fatal("Load accepted a playbook with six problems")
	}
	want := []string{
		path + `:5:7: role "common" not found (looked in testdata/bad/roles/common, `,
		path + `:8:7: module "ini_file" is not supported: nodeconverge owns whole files; use copy (content or src) or template with the whole file`,
		path + `:12:7: module "ansible.builtin.apt" is not supported: nodeconverge does not manage packages`,
		path + `:18:7: task keyword "delegate_to" is not supported: every task runs on the host it converges`,
		path + `:24:9: task "typo in an argument": copy_t: unknown argument "dset" (did you mean dest?)`,
		path + `:26:7: unknown module "coppy" (did you mean copy_t?)`,
	}
	lines := strings.Split(err.Error(), "\n")
	t.Logf("%s", err)
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d:\n got  %s\n want %s...", i+1, lines[i], w)
		}
	}
	var list *Errors
	if !errors.As(err, &list) || len(list.List) != len(want) {
		t.Errorf("err is %T, want *Errors with %d entries", err, len(want))
	}
	var first *Error
	if !errors.As(err, &first) || first.Pos.Line != 5 {
		t.Errorf("errors.As(*Error) = %v, want the first problem (line 5)", first)
	}
}

func TestSelectTags(t *testing.T) {
	mk := func(tags ...string) *Task { return &Task{Name: fmt.Sprint(tags), Tags: tags} }
	p := &Play{Tasks: []*Task{mk(), mk("a"), mk("b", "c"), mk("always"), mk("never"), mk("never", "a")}}
	names := func(only, skip []string) []string {
		var out []string
		for _, t := range SelectTags([]*Play{p}, only, skip)[0].Tasks {
			out = append(out, t.Name)
		}
		return out
	}
	for _, tc := range []struct {
		only, skip, want []string
	}{
		{nil, nil, []string{"[]", "[a]", "[b c]", "[always]"}},
		{[]string{"a"}, nil, []string{"[a]", "[always]", "[never a]"}},
		{[]string{"all"}, nil, []string{"[]", "[a]", "[b c]", "[always]"}},
		{nil, []string{"c"}, []string{"[]", "[a]", "[always]"}},
		{[]string{"untagged"}, nil, []string{"[]", "[always]"}},
		{[]string{"a"}, []string{"always"}, []string{"[a]", "[never a]"}},
	} {
		if diff := cmp.Diff(tc.want, names(tc.only, tc.skip)); diff != "" {
			t.Errorf("--tags %v --skip-tags %v (-want +got):\n%s", tc.only, tc.skip, diff)
		}
	}
	if len(p.Tasks) != 6 {
		t.Error("SelectTags changed the loaded play")
	}
}

// TestTaskKeywordsLoad: args: merges into a free-form command, conditions
// parse (a list is and, a bare boolean is one), become folds into the
// play, and bad ones are refused at their place.
func TestTaskKeywordsLoad(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - name: c
      command_t: ls /x
      args:
        creates: /y
      register: out
      when: [x | bool, "out is not defined"]
      changed_when: false
      become: true
      ignore_errors: yes
      vars:
        x: "yes"
`)
	if err != nil {
		t.Fatal(err)
	}
	task := plays[0].Tasks[0]
	a, err := task.Render(MergeVars(map[string]any{}, task.Vars))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&commandArgs{Cmd: "ls /x", Creates: "/y"}, a); diff != "" {
		t.Errorf("args: (-want +got):\n%s", diff)
	}
	if len(task.When) != 2 || len(task.ChangedWhen) != 1 || task.Register != "out" || !task.IgnoreErrors {
		t.Errorf("keywords: %+v", task)
	}
	if ok, err := task.ChangedWhen[0].Expr.Truth(nil); err != nil || ok {
		t.Errorf("changed_when: false = %v, %v", ok, err)
	}
	if b := plays[0].Become; b == nil || !*b {
		t.Error("a task's become: true did not make its play become")
	}
	_, err = loadText(t, `- hosts: all
  tasks:
    - name: a
      noop_t:
      become: true
      when: "x |"
    - name: b
      noop_t:
      become: false
      become_user: postgres
      register: "not a name"
`)
	for _, want := range []string{":6:13: when: template syntax",
		`:10:20: become_user: "postgres"`, `:11:17: register: "not a name" is not a variable name`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in:\n%v", want, err)
		}
	}
	_, err = loadText(t, "- hosts: all\n  tasks:\n    - name: a\n      noop_t:\n      become: true\n    - name: b\n      noop_t:\n      become: false\n")
	if err == nil || !strings.Contains(err.Error(), `:3:7: task "a" says become: true and task "b" says become: false`) {
		t.Errorf("become conflict: %v", err)
	}
}

// TestYAML11BoolConditions: a plain yes/no/on/off in when:, changed_when: or
// failed_when: is a boolean, as PyYAML reads it for Ansible (a public
// playbook's `changed_when: no` never reports changed); quoted, it stays an
// expression naming a variable.
func TestYAML11BoolConditions(t *testing.T) {
	load := func(v string) ([]*Play, error) {
		return loadText(t, "- hosts: all\n  tasks:\n    - name: x\n      changed_when: "+v+"\n      noop_t: {}\n")
	}
	for v, want := range map[string]bool{"no": false, "No": false, "NO": false, "off": false, "false": false,
		"yes": true, "Yes": true, "on": true, "ON": true, "true": true, "True": true} {
		plays, err := load(v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if ok, err := plays[0].Tasks[0].ChangedWhen[0].Expr.Truth(nil); err != nil || ok != want {
			t.Errorf("changed_when: %s = %v, %v; want %v", v, ok, err, want)
		}
	}
	for _, v := range []string{`"no"`, `'yes'`, `!!str off`} {
		plays, err := load(v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if _, err := plays[0].Tasks[0].ChangedWhen[0].Expr.Truth(nil); err == nil {
			t.Errorf("changed_when: %s was read as a boolean; want an expression naming a variable", v)
		}
	}
}

// TestShellArgQuoted: a shell argument's substitutions render quoted
// however the task writes it, an aliased key or an aliased argument
// mapping included, so a value never becomes shell syntax.
func TestShellArgQuoted(t *testing.T) {
	for name, task := range map[string]string{
		"plain":          "      shell_t:\n        cmd: \"echo {{ v }}\"\n",
		"aliased key":    "      shell_t:\n        *k : \"echo {{ v }}\"\n",
		"aliased args":   "      shell_t: *a\n",
		"free-form text": "      shell_t: \"echo {{ v }}\"\n",
	} {
		body := "- hosts: all\n  vars:\n    k: &k cmd\n    a: &a {cmd: \"echo {{ v }}\"}\n  tasks:\n    - name: x\n" + task
		plays, err := load("play.yaml", []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a, err := plays[0].Tasks[0].Render(map[string]any{"v": "$(id)"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := a.(*commandArgs).Cmd; got != "echo '$(id)'" {
			t.Errorf("%s: cmd = %q, want the value quoted", name, got)
		}
	}
}
