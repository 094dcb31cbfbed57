package shell_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	_ "nodeconverge/modules/command"
	_ "nodeconverge/modules/debug"
	"nodeconverge/modules/shell"
)

// TestHostileValueIsData renders a hostile inventory value into a command
// and a shell task of a real playbook and runs both on a local node: no
// injected command may run, and each prints the value as given.
func TestHostileValueIsData(t *testing.T) {
	dir := t.TempDir()
	marks := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")}
	label := "$(touch " + marks[0] + ")`touch " + marks[1] + "`; touch " + marks[2]
	pb := filepath.Join(dir, "site.yaml")
	body := `- hosts: all
  tasks:
    - name: command
      command:
        cmd: "echo {{ label }}"
    - name: shell
      shell:
        cmd: "echo {{ label }} | cat"
    - name: shell whole value
      shell:
        cmd: "{{ label }}"
`
	if err := os.WriteFile(pb, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	plays, err := playbook.Load(pb)
	if err != nil {
		t.Fatal(err)
	}
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(dir, "state"), RunID: "20260101T000000Z-test"})
	ctx := context.Background()
	for i, task := range plays[0].Tasks {
		args, err := task.Render(map[string]any{"label": label})
		if err != nil {
			t.Fatalf("render task %d: %v", i, err)
		}
		m, _ := module.Lookup(task.Module)
		plan, err := m.Check(ctx, transport.ReadOnly(h), args)
		if err != nil {
			t.Fatalf("check task %d: %v", i, err)
		}
		res, err := m.Apply(ctx, h, plan)
		if i == 2 {
			// The whole script is one quoted word: a command named by the
			// value, which does not exist. It fails; it injects nothing.
			if err == nil || !strings.Contains(err.Error(), "exited 127") {
				t.Errorf("task %d: the value ran as a command name? res %+v, err %v", i, res, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("apply task %d: %v", i, err)
		}
		if res.Output != label {
			t.Errorf("task %d printed %q, want %q", i, res.Output, label)
		}
	}
	for _, p := range marks {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists: a substituted value ran as shell code", p)
		}
	}
}

// TestShellRunsScripts: the shell module is where shell syntax works, in
// the directory chdir names.
func TestShellRunsScripts(t *testing.T) {
	dir := t.TempDir()
	res := runShell(t, dir, &shell.Args{Cmd: "printf 'x\\ny\\n' | wc -l > out && cat out", Chdir: dir})
	if strings.TrimSpace(res.Output) != "2" {
		t.Errorf("output %q, want 2", res.Output)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err != nil {
		t.Errorf("the redirection did not write in chdir: %v", err)
	}
}

// TestShellExecutable: executable: /bin/bash runs cmd with bash (a bash
// array works), with chdir and the environment as with /bin/sh; a relative
// executable is refused.
func TestShellExecutable(t *testing.T) {
	dir := t.TempDir()
	a := &shell.Args{Cmd: `a=(x y z); echo "${#a[@]} $PWD $V"`, Chdir: dir, Executable: "/bin/bash"}
	a.SetEnvironment(map[string]string{"V": "v1"})
	res := runShell(t, dir, a)
	if got, want := strings.TrimSpace(res.Output), "3 "+dir+" v1"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if err := (&shell.Args{Cmd: "true", Executable: "bash"}).Validate(); err == nil {
		t.Error("a relative executable was accepted")
	}
}

// TestRegistrationSays: what shell and command state in their registrations
// reaches the loader: an Ansible argument they do not take is refused with
// what to do instead, and until: is taken on them but refused on a converge
// module.
func TestRegistrationSays(t *testing.T) {
	pb := filepath.Join(t.TempDir(), "site.yaml")
	body := `- hosts: all
  tasks:
    - {name: a, shell: {cmd: "true", stdin: x}}
    - {name: b, command: {cmd: "true", executable: /bin/bash}}
    - {name: c, shell: "true", register: r, until: r.rc == 0}
    - {name: d, command: "true", register: r, until: r.rc == 0}
    - {name: e, debug: {msg: hi}, register: r, until: r is success}
`
	if err := os.WriteFile(pb, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := playbook.Load(pb)
	if err == nil {
		t.Fatal("loaded a playbook with unsupported arguments and until: on debug")
	}
	said := map[string]string{}
	for _, l := range strings.Split(err.Error(), "\n") {
		if _, rest, ok := strings.Cut(l, "site.yaml:"); ok {
			n, _, _ := strings.Cut(rest, ":")
			said[n] += l
		}
	}
	for line, want := range map[string]string{
		"3": `"stdin": not supported`,
		"4": `"executable": not supported: command runs no shell; use shell`,
		"7": "until: on debug: not supported: only command and shell are run again",
	} {
		if !strings.Contains(said[line], want) {
			t.Errorf("line %s: load error says %q, want %q\n%s", line, said[line], want, err)
		}
	}
	if said["5"]+said["6"] != "" {
		t.Errorf("until: on shell or command refused:\n%s", err)
	}
}

// runShell validates a, plans it read-only and applies it on a local node
// whose state lives under dir, failing the test at any error.
func runShell(t *testing.T, dir string, a *shell.Args) *module.Result {
	t.Helper()
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(dir, "state"), RunID: "20260101T000000Z-test"})
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan, err := shell.Module{}.Check(ctx, transport.ReadOnly(h), a)
	if err != nil {
		t.Fatal(err)
	}
	res, err := shell.Module{}.Apply(ctx, h, plan)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
