package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// Issue 29: hostile content and names. A node, an inventory or a variable
// can hold any byte; what nodeconverge prints must stay the operator's
// text: control characters shown as visible escapes, no line that reads
// as another host's status or recap, and the JSON report exact.

// rawControl returns the first raw control byte (other than newline and
// tab) of s, or -1.
func rawControl(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			return i
		}
	}
	return -1
}

// hostileComment is the operator comment in config.toml: a NUL, an
// OSC that retitles the window, a screen clear and a colour.
const hostileComment = "# ops: \x00 do not edit \x1b]0;pwned\x07\x1b[2J\x1b[31m red"

// TestFaultNodeTextEscaped (issue 29 item 1): a node's config.toml carries
// the hostile comment next to a line a task changes, and a command prints
// escape sequences. `apply --check --diff -v` and `apply --diff -v` show the
// comment as diff context and the output, with every control byte as a
// visible escape on stdout and stderr (none dropped); the JSON report's
// diff holds the bytes exactly; the node's file keeps them.
func TestFaultNodeTextEscaped(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	n := l.Nodes[0].Name
	config := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n  " + hostileComment + "\n"
	putFile(t, l, n, "/etc/containerd/config.toml", config)
	pb := writePlaybook(t, `
- name: hostile node text
  hosts: all
  tasks:
    - name: cgroup driver
      replace:
        path: /etc/containerd/config.toml
        regexp: 'SystemdCgroup = false'
        replace: 'SystemdCgroup = true'
    - name: a tool that paints
      shell:
        cmd: 'printf ''tool \033]0;owned\007 says \033[2J\000 hi\r\n'''
`)
	shown := `\x00 do not edit \x1b]0;pwned\x07\x1b[2J\x1b[31m red`
	for _, mode := range [][]string{{"--check"}, nil} {
		rep := filepath.Join(t.TempDir(), "r.json")
		args := append(append([]string{"apply", "--diff", "-v", "--report", "json=" + rep}, mode...), labArgs(l, pb)...)
		r, _ := ncBounded(t, 120*time.Second, args...)
		if mode == nil {
			wantCode(t, r, 0)
		} else {
			wantCode(t, r, 2)
		}
		for name, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
			if i := rawControl(s); i >= 0 {
				t.Errorf("%v: raw control byte %q on %s at %d:\n%q", mode, s[i], name, i, s)
			}
		}
		if !strings.Contains(r.stdout, "   # ops: "+shown+"\n") {
			t.Errorf("%v: the comment is not shown as escaped diff context %q:\n%s", mode, shown, r.stdout)
		}
		if mode == nil && !strings.Contains(r.stdout, `tool \x1b]0;owned\x07 says \x1b[2J\x00 hi\r`) {
			t.Errorf("the command's output is not shown escaped:\n%s", r.stdout)
		}
		b, err := os.ReadFile(rep)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Results []struct {
				Diff string `json:"diff"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%v: the JSON report does not decode: %v", mode, err)
		}
		exact := false
		for _, res := range doc.Results {
			exact = exact || strings.Contains(res.Diff, " "+hostileComment+"\n")
		}
		if !exact {
			t.Errorf("%v: the JSON report's diff does not hold the comment's bytes exactly:\n%s", mode, b)
		}
	}
	got, err := os.ReadFile(l.NodePath(n, "/etc/containerd/config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(config, "false", "true", 1); string(got) != want {
		t.Errorf("config.toml is %q, want %q", got, want)
	}
}

// forged says which line of out reads as a status or recap line of a host
// that did not write it: one that starts with a status of host, or with
// host and " : ok=", or with NOTE: from text that is not ours.
func forged(out, host string) string {
	for _, l := range strings.Split(out, "\n") {
		for _, p := range []string{"ok: [" + host + "]", "changed: [" + host + "]", "failed: [" + host + "]", host + " : ok=", "NOTE: forged"} {
			if strings.HasPrefix(l, p) {
				return l
			}
		}
	}
	return ""
}

// TestFaultForgedNames (issue 29 item 2): an inventory host named with
// newlines that spell another host's recap line is refused at load, naming
// the file and line, in YAML and INI; a group name with an escape too. A
// variable whose value spells another host's status line, used in a copy's
// dest and a debug message, is printed on its own line (escaped) or
// indented under the status line it belongs to: no line reads as the
// other host's.
func TestFaultForgedNames(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
	n, other := l.Nodes[0].Name, l.Nodes[1].Name
	dir := t.TempDir()
	evilYAML := filepath.Join(dir, "evil.yaml")
	if err := os.WriteFile(evilYAML, []byte("all:\n  hosts:\n    \"evil\\n"+other+" : ok=3 changed=0 unreachable=0 failed=0 skipped=0\\nNOTE: forged\":\n      ansible_host: 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evilINI := filepath.Join(dir, "evil.ini")
	if err := os.WriteFile(evilINI, []byte("[ok]\n"+n+"\n\n[bad\x1b[2Jgroup]\n"+other+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pb := writePlaybook(t, `
- name: forged
  hosts: all
  tasks:
    - name: print
      debug:
        msg: hello
`)
	for _, c := range []struct{ inv, at string }{{evilYAML, evilYAML + ":3:"}, {evilINI, evilINI + ":4:"}} {
		r, _ := ncBounded(t, 60*time.Second, "apply", "-i", l.Inventory, "-i", c.inv, "--known-hosts", l.KnownHosts, "--ssh-config", "/dev/null", pb)
		wantCode(t, r, 1)
		if !strings.Contains(r.stderr, c.at) || !strings.Contains(r.stderr, "control character") {
			t.Errorf("want the name refused at %s naming the control character:\n%s", c.at, r)
		}
		if f := forged(r.stdout+"\n"+r.stderr, other); f != "" {
			t.Errorf("forged line %q:\n%s", f, r)
		}
		if i := rawControl(r.stdout + r.stderr); i >= 0 {
			t.Errorf("raw control byte in:\n%q", r.stdout+r.stderr)
		}
	}
	pb = writePlaybook(t, `
- name: forged values
  hosts: `+n+`
  vars:
    evil: "a\nok: [`+other+`] => {\"changed\": false}\nNOTE: forged"
  tasks:
    - name: a file named by the value
      copy:
        dest: "/etc/containerd/{{ evil }}.toml"
        content: "x\n"
    - name: the value as a message
      debug:
        msg: "{{ evil }}"
`)
	for _, mode := range [][]string{{"--check"}, nil} {
		r, _ := ncBounded(t, 120*time.Second, append(append([]string{"apply", "--diff"}, mode...), labArgs(l, pb)...)...)
		// Whether such a dest is written is not this test's matter
		// (a path with a newline is refused: TestFaultRenderedPathDotDot);
		// what is printed is.
		if f := forged(r.stdout+"\n"+r.stderr, other); f != "" {
			t.Errorf("%v: forged line %q:\n%s", mode, f, r)
		}
		if i := rawControl(r.stdout + r.stderr); i >= 0 {
			t.Errorf("%v: raw control byte in:\n%q", mode, r.stdout+r.stderr)
		}
		if !strings.Contains(r.stdout+r.stderr, `/etc/containerd/a\nok: [`+other+`] => {"changed": false}\nNOTE: forged.toml`) {
			t.Errorf("%v: the dest is not shown escaped on one line:\n%s", mode, r)
		}
	}
}

// TestFaultRenderedPathDotDot (issue 29 item 3): a copy to
// /etc/containerd/certs.d/{{ registry }}/hosts.toml with registry
// '../../sysctl.d/x' would write /etc/sysctl.d/x/hosts.toml. It is refused
// when the path is rendered: `--check` fails the task naming the path and
// where its `..` would put the write, and apply refuses the host with the
// same words before its first task writes: the node's tree is unchanged.
// A dest with a newline is refused the same way in both modes.
func TestFaultRenderedPathDotDot(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	n := l.Nodes[0].Name
	for _, c := range []struct{ registry, want string }{
		{"../../sysctl.d/x", "its `..` would put the write at /etc/sysctl.d/x/hosts.toml"},
		{"a\nb", `path /etc/containerd/certs.d/a\nb/hosts.toml holds a control character`},
	} {
		pb := writePlaybook(t, `
- name: a path from a variable
  hosts: all
  vars:
    registry: "`+strings.ReplaceAll(c.registry, "\n", `\n`)+`"
  tasks:
    - name: first, harmless
      copy:
        dest: /etc/containerd/first.toml
        content: "# first\n"
    - name: hosts.toml of the registry
      copy:
        dest: "/etc/containerd/certs.d/{{ registry }}/hosts.toml"
        content: "server = \"http://harbor.lab\"\n"
`)
		before := l.HashTree(t, n)
		check, _ := ncBounded(t, 120*time.Second, append([]string{"apply", "--check"}, labArgs(l, pb)...)...)
		wantCode(t, check, 1)
		apply, _ := ncBounded(t, 120*time.Second, append([]string{"apply"}, labArgs(l, pb)...)...)
		wantCode(t, apply, 1)
		for what, r := range map[string]result{"check": check, "apply": apply} {
			if !strings.Contains(r.stdout, c.want) {
				t.Errorf("%q: %s does not refuse the path saying %q:\n%s", c.registry, what, c.want, r)
			}
		}
		if strings.Contains(apply.stdout, "rolled back") {
			t.Errorf("%q: apply wrote and rolled back instead of refusing before the first write:\n%s", c.registry, apply)
		}
		if d := cmp.Diff(before, l.HashTree(t, n)); d != "" {
			t.Errorf("%q: the node changed (-before +after):\n%s", c.registry, d)
		}
	}
}

// TestFaultNeverTwoWriters (issue 29 item 4): a run's node-side script is
// blocked inside a step (a shell task that sleeps, then writes) when the
// run's controller is killed. Its connection dies, the script does not.
// The next run finds the lock stale; before it takes the lock over it ends
// the old script and everything below it and says so, so the old step can
// never write under the new run's lock: the file the new run writes keeps
// the new run's content after the old step's process is gone.
func TestFaultNeverTwoWriters(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	node := l.Nodes[0].Name
	old := writePlaybook(t, `
- name: the old run
  hosts: all
  tasks:
    - name: blocked in a step, then writes
      shell:
        cmd: "echo $$ > /etc/containerd/.b && mv /etc/containerd/.b /etc/containerd/blocked.pid; sleep 40; echo old-run > /etc/containerd/owner.txt"
`)
	a, aout := start(t, append([]string{"apply"}, labArgs(l, old)...)...)
	pidFile := l.NodePath(node, "/etc/containerd/blocked.pid")
	waitFile(t, pidFile, 60*time.Second)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	blocked := strings.TrimSpace(string(b))
	lock, err := os.ReadFile(l.NodePath(node, "/var/lib/nodeconverge/lock.d/x"))
	if err != nil {
		t.Fatal(err)
	}
	holder := ""
	for _, line := range strings.Split(string(lock), "\n") {
		if v, ok := strings.CutPrefix(line, "holder_pid="); ok {
			holder = v
		}
	}
	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err == nil {
		t.Fatalf("the killed run exited 0:\n%s", aout)
	}
	// The old run's connection (its sshd) ends once the controller is
	// gone; its script goes on.
	waitGone(t, holder, 30*time.Second)
	if _, err := os.Stat("/proc/" + blocked); err != nil {
		t.Fatalf("the old step (pid %s) ended with its connection: the test shows nothing: %v", blocked, err)
	}
	next := writePlaybook(t, `
- name: the next run
  hosts: all
  tasks:
    - name: write the file
      copy:
        dest: /etc/containerd/owner.txt
        content: "new-run\n"
`)
	r, _ := ncBounded(t, 120*time.Second, append([]string{"apply"}, labArgs(l, next)...)...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "took over the lock of node "+node) || !strings.Contains(r.stdout, "were ended first and are gone") ||
		!strings.Contains(r.stdout, blocked+"(") {
		t.Errorf("the takeover does not say that the old run's processes (pid %s among them) were ended:\n%s", blocked, r)
	}
	// Whatever the old step would do, it does by the time it is gone.
	waitGone(t, blocked, 60*time.Second)
	got, err := os.ReadFile(l.NodePath(node, "/etc/containerd/owner.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "new-run\n" {
		t.Errorf("owner.txt is %q: the old run wrote under the new run's lock", got)
	}
}

// waitGone polls until process pid is gone or a zombie, with a deadline.
func waitGone(t *testing.T, pid string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && strings.HasPrefix(string(st[i:]), ") Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s did not end within %v", pid, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFaultRollbackOnlyWhatChanged (issue 29 item 5): config.toml is
// immutable (chattr +i). The play's first task creates a drop-in, the
// second edits config.toml: its write fails naming the task and EPERM.
// The rollback removes the drop-in the run created and leaves config.toml
// alone, which the run never changed: it reports no rollback failure and
// does not claim to have restored config.toml; the node is as before.
func TestFaultRollbackOnlyWhatChanged(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	n := l.Nodes[0].Name
	cfg := "/etc/containerd/config.toml"
	putFile(t, l, n, cfg, "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n")
	l.Exec(t, n, "chattr", "+i", cfg)
	t.Cleanup(func() {
		// The lab's files are removed after the test; an immutable one
		// would stay.
		if out, err := l.TryExec(n, "chattr", "-i", cfg); err != nil {
			t.Errorf("chattr -i %s: %v\n%s", cfg, err, out)
		}
	})
	before := l.HashTree(t, n)
	pb := writePlaybook(t, `
- name: an immutable config
  hosts: all
  tasks:
    - name: a drop-in
      copy:
        dest: /etc/containerd/conf.d/50-probe.toml
        content: "version = 2\n"
    - name: cgroup driver
      replace:
        path: /etc/containerd/config.toml
        regexp: 'SystemdCgroup = false'
        replace: 'SystemdCgroup = true'
`)
	r, _ := ncBounded(t, 120*time.Second, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, `"cgroup driver"`) || !strings.Contains(r.stdout, "Operation not permitted") {
		t.Errorf("the failure does not name the task and EPERM:\n%s", r)
	}
	if strings.Contains(r.stdout, "ROLLBACK FAILED") || strings.Contains(r.stdout, "incomplete") {
		t.Errorf("the rollback reports a failure although the files are as before:\n%s", r)
	}
	if !strings.Contains(r.stdout, "rolled back this host's run: restored /etc/containerd/conf.d/50-probe.toml") {
		t.Errorf("the rollback does not say it removed the drop-in the run created:\n%s", r)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "rolled back this host's run") && strings.Contains(l, cfg) {
			t.Errorf("the rollback claims to have restored %s, which the run never changed: %s", cfg, l)
		}
	}
	if d := cmp.Diff(before, l.HashTree(t, n)); d != "" {
		t.Errorf("the node is not as before (-before +after):\n%s", d)
	}
}

// TestFaultCheckModeWritesNothing (issue 29 item 7): `apply --check` (and
// explain) on a node whose state directory is empty writes nothing: no
// file changes under /etc, and the state directory holds only the empty
// tmp/ directory the scripts make their private directories in (removed
// as each script ends), as the README says; no memo/ of command outputs.
func TestFaultCheckModeWritesNothing(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1})
	n := l.Nodes[0].Name
	state := l.NodePath(n, "/var/lib/nodeconverge")
	// Emptied, not removed: the node sees it through a bind mount.
	if fresh := entries(t, state); len(fresh) != 0 {
		for _, e := range fresh {
			if err := os.RemoveAll(filepath.Join(state, e)); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := l.HashTree(t, n)
	r, _ := ncBounded(t, 300*time.Second, append([]string{"apply", "--check", "--diff"}, labArgs(l, shippedPlaybook())...)...)
	if r.code != 0 && r.code != 2 {
		t.Fatalf("check failed:\n%s", r)
	}
	e, _ := ncBounded(t, 300*time.Second, "explain", "-i", l.Inventory, "--known-hosts", l.KnownHosts, "--ssh-config", "/dev/null")
	if e.code != 0 {
		t.Fatalf("explain failed:\n%s", e)
	}
	if d := cmp.Diff(before, l.HashTree(t, n)); d != "" {
		t.Errorf("check mode changed the node (-before +after):\n%s", d)
	}
	var left []string
	err := filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(state, p); rel != "." {
			left = append(left, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(left, []string{"tmp"}) {
		t.Errorf("check mode and explain left %q under /var/lib/nodeconverge, want only the empty tmp directory", left)
	}
}
