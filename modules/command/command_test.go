package command_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/modules/command"
)

func newHost(t *testing.T) (*node.Host, string) {
	t.Helper()
	root := t.TempDir()
	return node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"}), root
}

func check(t *testing.T, h *node.Host, a *command.Args) *module.Plan {
	t.Helper()
	if err := a.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	plan, err := command.Module{}.Check(context.Background(), transport.ReadOnly(h), a)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return plan
}

func run(t *testing.T, h *node.Host, a *command.Args) (*module.Result, error) {
	t.Helper()
	plan := check(t, h, a)
	if !plan.Changed() {
		t.Fatalf("plan %+v runs nothing", plan)
	}
	return command.Module{}.Apply(context.Background(), h, plan)
}

func TestCreatesAndRemovesGuards(t *testing.T) {
	h, dir := newHost(t)
	there := filepath.Join(dir, "there")
	if err := os.WriteFile(there, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		args command.Args
		runs bool
	}{
		{"creates exists", command.Args{Cmd: "true", Creates: there}, false},
		{"creates missing", command.Args{Cmd: "true", Creates: missing}, true},
		{"removes exists", command.Args{Cmd: "true", Removes: there}, true},
		{"removes missing", command.Args{Cmd: "true", Removes: missing}, false},
		{"no guard", command.Args{Cmd: "true"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := check(t, h, &tc.args)
			if plan.Changed() != tc.runs {
				t.Errorf("plan %+v: runs %v, want %v", plan, plan.Changed(), tc.runs)
			}
			if !tc.runs && len(plan.Notes) != 1 {
				t.Errorf("a skipped command says why: notes %q", plan.Notes)
			}
			if tc.runs && (len(plan.Commands) != 1 || plan.Commands[0] != "true") {
				t.Errorf("commands = %q", plan.Commands)
			}
		})
	}
	// The guard makes it idempotent: run once, then nothing to do.
	marker := filepath.Join(dir, "made")
	a := &command.Args{Cmd: "touch " + transport.ShellQuote(marker), Creates: marker}
	if _, err := run(t, h, a); err != nil {
		t.Fatal(err)
	}
	if plan := check(t, h, a); plan.Changed() {
		t.Errorf("after the command made %s, the plan still runs it: %+v", marker, plan)
	}
}

// tricky arguments that a naive join would split or expand.
var tricky = []string{"with space", `it's "quoted"`, "$HOME", "a;b", "`id`", "*", ""}

func TestArgvArrivesIntact(t *testing.T) {
	h, _ := newHost(t)
	res, err := run(t, h, &command.Args{Argv: append([]string{"printf", "[%s]\n"}, tricky...)})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range tricky {
		want = append(want, "["+s+"]")
	}
	if res.Output != strings.Join(want, "\n") || !res.Changed {
		t.Errorf("output:\n%s\nwant:\n%s", res.Output, strings.Join(want, "\n"))
	}
}

func TestChdir(t *testing.T) {
	h, root := newHost(t)
	dir := filepath.Join(root, "a dir with 'quotes'")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file name"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := run(t, h, &command.Args{Cmd: "pwd", Chdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != dir {
		t.Errorf("pwd = %q, want %q", res.Output, dir)
	}
	// chdir with argv keeps argv's quoting.
	res, err = run(t, h, &command.Args{Argv: []string{"cat", "file name"}, Chdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "inside" {
		t.Errorf("cat = %q", res.Output)
	}
	if res, err := run(t, h, &command.Args{Argv: append([]string{"printf", "[%s]"}, tricky...), Chdir: dir}); err != nil || !strings.Contains(res.Output, `[it's "quoted"][$HOME]`) {
		t.Errorf("argv with chdir: %+v, %v", res, err)
	}
}

func TestNonZeroExitFailsWithOutput(t *testing.T) {
	h, _ := newHost(t)
	res, err := run(t, h, &command.Args{Argv: []string{"sh", "-c", "echo partial; echo 'disk full' >&2; exit 3"}})
	if err == nil {
		t.Fatalf("apply succeeded: %+v", res)
	}
	for _, want := range []string{"exited 3", "partial", "disk full"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
}

func TestValidateArgs(t *testing.T) {
	for _, a := range []command.Args{{}, {Cmd: "true", Argv: []string{"true"}}, {Cmd: "echo 'unterminated"}, {Cmd: "   "}} {
		if err := a.Validate(); err == nil {
			t.Errorf("%+v: Validate accepted it", a)
		}
	}
}

// The runner must not re-check a command: its plan is not a state.
func TestImperative(t *testing.T) {
	reg, ok := module.Lookup("command")
	if !ok || !reg.Imperative {
		t.Error("command does not declare itself imperative")
	}
}

// TestCmdRunsNoShell: cmd is split into argv like Ansible's command module;
// shell syntax in it, substituted from a hostile variable or not, is text.
func TestCmdRunsNoShell(t *testing.T) {
	h, root := newHost(t)
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	label := "$(touch " + a + ")`touch " + b + "`; touch " + c + " | true > " + filepath.Join(root, "d") + " *"
	res, err := run(t, h, &command.Args{Cmd: "echo " + label})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b, c, filepath.Join(root, "d")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created: cmd went through a shell", p)
		}
	}
	if res.Output != label {
		t.Errorf("echo printed %q, want the words as given %q", res.Output, label)
	}
}

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"echo hi", []string{"echo", "hi"}},
		{"  a \t  b  ", []string{"a", "b"}},
		{`a\tb`, []string{"atb"}},
		{`a 'b c' "d e" f\ g`, []string{"a", "b c", "d e", "f g"}},
		{`'it'"'"'s'`, []string{"it's"}},
		{`"a\"b" "\$x" "\q"`, []string{`a"b`, "$x", `\q`}},
		{`'' ""`, []string{"", ""}},
		{"a;b $(c) `d` e|f", []string{"a;b", "$(c)", "`d`", "e|f"}},
	} {
		got, err := command.SplitArgs(tc.in)
		if err != nil {
			t.Errorf("SplitArgs(%q): %v", tc.in, err)
			continue
		}
		if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") || len(got) != len(tc.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{`a 'b`, `a "b`, `a\`} {
		if _, err := command.SplitArgs(bad); err == nil {
			t.Errorf("SplitArgs(%q) accepted it", bad)
		}
	}
}
