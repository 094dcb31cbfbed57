package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// Issue 11 item 7 and the node-side minor items, on lab nodes.

// privateTmp gives the node a /tmp of its own (a tmpfs mounted in its
// mount namespace), so a test can see everything a run leaves in the
// node's /tmp, which the lab otherwise shares with the host. What the node
// needs from the host's /tmp stays at its path (bind-mounted into the
// tmpfs): the lab directory (sshd's config and the systemctl stand-in live
// there) and the node's containerd binary, which lives in the checkout's
// bin/ and so under /tmp when the checkout does (tmpKept).
func privateTmp(t *testing.T, l *labtest.Lab, node string) {
	t.Helper()
	anchor := filepath.Join(l.Node(t, node).Root, "private-tmp")
	if err := os.MkdirAll(anchor, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "set -e; mount -t tmpfs -o size=16m,mode=1777 nc-private-tmp " + shellWord(anchor)
	for _, dir := range tmpKept(t, l, node) {
		in := shellWord(filepath.Join(anchor, strings.TrimPrefix(dir, nodeTmpPrefix)))
		script += fmt.Sprintf("; mkdir -p %s; mount --bind %s %s", in, shellWord(dir), in)
	}
	script += fmt.Sprintf("; mount --move %s /tmp", shellWord(anchor))
	l.Exec(t, node, "sh", "-c", script)
}

// tmpKept are the directories under /tmp that privateTmp keeps visible on
// the node: the lab's, and the one holding the node's containerd binary.
func tmpKept(t *testing.T, l *labtest.Lab, node string) []string {
	t.Helper()
	dirs := []string{l.Dir}
	if b, err := os.ReadFile(filepath.Join(l.Node(t, node).Root, "containerd-bin")); err == nil {
		if bin := strings.TrimSpace(string(b)); bin != "" {
			if real, err := filepath.EvalSymlinks(bin); err == nil {
				bin = real
			}
			dirs = append(dirs, filepath.Dir(bin))
		}
	}
	var out []string
	for _, d := range dirs {
		if strings.HasPrefix(d, nodeTmpPrefix) {
			out = append(out, d)
		}
	}
	return out
}

// nodeTmpPrefix is the node's own /tmp mount point (privateTmp replaces it), not a
// fixture path: what the lab keeps there is found under it by prefix.
const nodeTmpPrefix = "/tmp" + string(filepath.Separator)

// shellWord quotes s as one word for sh.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// nodeTmp lists the node's /tmp but for what privateTmp kept there.
func nodeTmp(t *testing.T, l *labtest.Lab, node string) []string {
	t.Helper()
	kept := map[string]bool{}
	for _, d := range tmpKept(t, l, node) {
		first, _, _ := strings.Cut(strings.TrimPrefix(d, nodeTmpPrefix), "/")
		kept[first] = true
	}
	var left []string
	for _, n := range strings.Split(strings.TrimSpace(l.Exec(t, node, "ls", "-A", "/tmp")), "\n") {
		if n != "" && !kept[n] {
			left = append(left, n)
		}
	}
	return left
}

// dumpGate is a containerd for the node that, while /root/gate.on exists,
// stops at its first `config dump`: it records where it runs (the staged
// tree), its parent (the run's script shell) and its connection's sshd
// processes, then blocks reading /root/gate.fifo, which the test holds.
const dumpGate = `#!/bin/sh
if [ -e /root/gate.on ]; then
	case " $* " in
	*" config dump "*)
		rm -f /root/gate.on
		` + sessionSSHD + `
		printf '%s\n%s\n%s\n' "$PWD" "$PPID" "$s" > /root/gate.info.tmp
		mv /root/gate.info.tmp /root/gate.info
		read x < /root/gate.fifo
		;;
	esac
fi
exec BIN "$@"
`

// TestFaultKillDuringStagedDump (issue 11 item 7): the controller is
// killed (SIGKILL) while the node's containerd dumps a staged tree that
// holds a drop-in's registry password. The staged tree is under the
// node's state directory, not /tmp; the next run removes it although the
// killed run's dump is still blocked; and once that dump ends, nothing
// the runs made is left in the node's /tmp or state directory.
func TestFaultKillDuringStagedDump(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			bin := labtest.Containerd(t, g.gen)
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "none", NoContainerd: true, ContainerdBin: bin})
			node := l.Nodes[0].Name
			privateTmp(t, l, node)
			const secret = "hunter2-registry-password"
			putFile(t, l, node, "/etc/containerd/config.toml", "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.9\"\n")
			putFile(t, l, node, "/etc/containerd/conf.d/50-registry.toml",
				"version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"harbor.lab\".auth]\n  username = \"robot\"\n  password = \""+secret+"\"\n")
			gate := l.NodePath(node, "/usr/local/sbin/dump-gate")
			if err := os.WriteFile(gate, []byte(strings.Replace(dumpGate, "BIN", shellWord(bin), 1)), 0o755); err != nil {
				t.Fatal(err)
			}
			fifo := l.NodePath(node, "/root/gate.fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(l.NodePath(node, "/root/gate.on"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			pb := writePlaybook(t, `
- name: dropins
  hosts: all
  tasks:
    - name: relocate drop-ins that shadow earlier settings
      containerd_dropins:
        containerd: /usr/local/sbin/dump-gate
`)
			run := command(append([]string{"apply"}, labArgs(l, pb)...)...)
			var out strings.Builder
			run.Stdout, run.Stderr = &out, &out
			if err := run.Start(); err != nil {
				t.Fatal(err)
			}
			// Opening the fifo for writing returns once the gate opened
			// it for reading: the dump is under way and gate.info
			// written. A run that never gets there fails the test
			// through the go test timeout; killing it first keeps
			// the output.
			opened := make(chan *os.File, 1)
			go func() {
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					t.Error(err)
				}
				opened <- f
			}()
			waited := make(chan error, 1)
			go func() { waited <- run.Wait() }()
			var w *os.File
			select {
			case w = <-opened:
			case err := <-waited:
				t.Fatalf("the run ended (%v) before its dump reached the gate:\n%s", err, out.String())
			}
			if w == nil {
				t.FailNow()
			}
			defer w.Close()
			if err := run.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-waited
			info, err := os.ReadFile(l.NodePath(node, "/root/gate.info"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(info), "\n")
			if len(lines) < 3 {
				t.Fatalf("gate.info = %q", info)
			}
			staged, shell, sshds := lines[0], lines[1], strings.Fields(lines[2])
			stateTmp := "/var/lib/nodeconverge/tmp/"
			if !strings.HasPrefix(staged, stateTmp) {
				t.Fatalf("the staged tree is at %s, want under %s", staged, stateTmp)
			}
			// The staged copy holds the password while the dump runs:
			// this is what must not outlive the run.
			if out, err := l.TryExec(node, "grep", "-rl", secret, filepath.Dir(staged)); err != nil || strings.TrimSpace(out) == "" {
				ls, _ := l.TryExec(node, "sh", "-c", "ls -laR "+filepath.Dir(staged)+"; head -50 "+filepath.Dir(staged)+"/*/*")
				t.Fatalf("no staged copy of the drop-in in %s (%v):\n%s", staged, err, ls)
			}
			// The killed controller's connection ends on the node;
			// wait for its sshd processes (not for the dump, which
			// is still blocked).
			for _, pid := range sshds {
				if err := waitExit(pid, 30*time.Second); err != nil {
					t.Fatalf("sshd %s of the killed run's connection: %v", pid, err)
				}
			}

			next, _ := ncBounded(t, 120*time.Second, append([]string{"apply", "--check"}, labArgs(l, pb)...)...)
			if next.code != 0 && next.code != 2 {
				t.Fatalf("the next run failed:\n%s", next)
			}
			if _, err := os.Stat(l.NodePath(node, staged)); !os.IsNotExist(err) {
				t.Fatalf("the killed run's staged tree %s survived the next run (stat: %v)", staged, err)
			}

			// Let the killed run's dump go: its script ends.
			if _, err := w.Write([]byte("go\n")); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := waitExit(shell, 30*time.Second); err != nil {
				t.Fatalf("the killed run's script shell %s: %v", shell, err)
			}
			if left := nodeTmp(t, l, node); len(left) != 0 {
				t.Errorf("left in the node's /tmp: %q", left)
			}
			if left := entries(t, l.NodePath(node, stateTmp)); len(left) != 0 {
				t.Errorf("left in the node's %s: %q", stateTmp, left)
			}
		})
	}
}

// entries lists the names in dir; a missing dir has none.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestFaultSysctlRollback (issue 11 item 9): a run that set a live sysctl
// value and then failed is rolled back: the file and the live value are
// those from before the run, and the output names both.
func TestFaultSysctlRollback(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	node := l.Nodes[0].Name
	proc := "/proc/sys/fs/inotify/max_user_instances"
	if got := strings.TrimSpace(l.Exec(t, node, "cat", proc)); got != "128" {
		t.Fatalf("the lab node's %s is %s, want 128", proc, got)
	}
	pb := writePlaybook(t, `
- name: limits then a failure
  hosts: all
  tasks:
    - name: inotify
      sysctl:
        values:
          fs.inotify.max_user_instances: "8192"
    - name: fail
      command:
        cmd: "false"
`)
	r, _ := ncBounded(t, 120*time.Second, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "rolled back this host's run: restored "+proc+", /etc/sysctl.d/99-inotify.conf") {
		t.Fatalf("want the rollback to name the live value and the file:\n%s", r)
	}
	if got := strings.TrimSpace(l.Exec(t, node, "cat", proc)); got != "128" {
		t.Errorf("after the rollback %s = %s, want 128 (the value before the run)", proc, got)
	}
	if _, err := os.Stat(l.NodePath(node, "/etc/sysctl.d/99-inotify.conf")); !os.IsNotExist(err) {
		t.Errorf("after the rollback /etc/sysctl.d/99-inotify.conf: %v, want it gone", err)
	}
}

// fullBackups mounts a small tmpfs at the node's backup area and fills it.
func fullBackups(t *testing.T, l *labtest.Lab, node string) {
	t.Helper()
	l.Exec(t, node, "sh", "-c", "set -e; mkdir -p /var/lib/nodeconverge/backups; "+
		"mount -t tmpfs -o size=64k,mode=0700 nc-backups /var/lib/nodeconverge/backups; "+
		"dd if=/dev/zero of=/var/lib/nodeconverge/backups/filler bs=4k 2>/dev/null || test -s /var/lib/nodeconverge/backups/filler")
}

// TestFaultBackupAreaFull (issue 11, minor): with the node's backup area
// full, a run that must record or back up a change fails naming the path
// and "no space left on device", and changes nothing.
func TestFaultBackupAreaFull(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	node := l.Nodes[0].Name
	putFile(t, l, node, "/etc/containerd/old.conf", "old\n")
	fullBackups(t, l, node)
	before := l.HashTree(t, node)
	for _, c := range []struct{ name, dest, path string }{
		{"new file: the manifest cannot grow", "/etc/containerd/new.conf", "/var/lib/nodeconverge/backups/"},
		{"existing file: its backup cannot be made", "/etc/containerd/old.conf", "/var/lib/nodeconverge/backups/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pb := writePlaybook(t, `
- name: full
  hosts: all
  tasks:
    - name: write
      copy:
        dest: `+c.dest+`
        content: "new\n"
`)
			r, _ := ncBounded(t, 120*time.Second, append([]string{"apply"}, labArgs(l, pb)...)...)
			wantCode(t, r, 1)
			if !strings.Contains(r.stdout, "no space left on device") || !strings.Contains(r.stdout, c.path) || strings.Contains(r.stdout, "I/O error") {
				t.Fatalf("want a failure naming %s and \"no space left on device\":\n%s", c.path, r)
			}
			if diff := cmp.Diff(before, l.HashTree(t, node)); diff != "" {
				t.Errorf("the node changed:\n%s", diff)
			}
		})
	}
}

// bigYAML writes a valid YAML file of at least size bytes: a list of
// plays, the shape of the 50 MB playbook. It is streamed to the
// file, so this process stays small and a child's peak RSS (which counts
// the parent's at the child's exec) measures the child.
func bigYAML(t *testing.T, size int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "big.yaml")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i, n := 0, 0; n < size; i++ {
		k, err := fmt.Fprintf(w, "- name: play %d\n  hosts: nobody\n  tasks:\n    - name: t\n      command:\n        cmd: \"true\"\n", i)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFaultOversizedInputs (issue 11, minor): a 50 MB playbook, an
// oversized inventory, vars file or copy src is refused with an error
// naming the file and the limit, and the controller stays small (a 50 MB
// playbook took 3 GB before).
func TestFaultOversizedInputs(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	node := l.Nodes[0].Name
	small := writePlaybook(t, `
- name: small
  hosts: all
  tasks:
    - name: motd
      copy:
        dest: /etc/containerd/motd
        content: "hi\n"
`)
	big := bigYAML(t, 50<<20)

	t.Run("playbook", func(t *testing.T) {
		cmd := command(append([]string{"apply", "--check"}, labArgs(l, big)...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("want exit 1, got %v:\n%s", err, out)
		}
		want := "read playbook " + big + ": too large: "
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "over the limit of 4 MiB") {
			t.Fatalf("want %q and the limit:\n%s", want, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		t.Logf("peak RSS %d MiB", ru.Maxrss>>10)
		if ru.Maxrss > 200<<10 {
			t.Errorf("peak RSS %d MiB refusing a 50 MB playbook", ru.Maxrss>>10)
		}
	})

	t.Run("inventory", func(t *testing.T) {
		inv := filepath.Join(t.TempDir(), "inventory.yaml")
		if err := os.WriteFile(inv, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(inv, 33<<20); err != nil {
			t.Fatal(err)
		}
		r := nc(t, "apply", "--check", "-i", inv, small)
		wantCode(t, r, 1)
		if !strings.Contains(r.stdout+r.stderr, "read inventory "+inv+": too large: 34603008 bytes, over the limit of 32 MiB") {
			t.Fatalf("want the inventory and the limit named:\n%s", r)
		}
	})

	t.Run("vars file", func(t *testing.T) {
		vars := bigYAML(t, 5<<20)
		r := nc(t, append([]string{"apply", "--check", "-e", "@" + vars}, labArgs(l, small)...)...)
		wantCode(t, r, 1)
		if !strings.Contains(r.stdout+r.stderr, "read extra vars: too large: ") || !strings.Contains(r.stdout+r.stderr, vars) ||
			!strings.Contains(r.stdout+r.stderr, "over the limit of 4 MiB (4194304 bytes) for a vars file") {
			t.Fatalf("want the vars file and the limit named:\n%s", r)
		}
	})

	t.Run("copy src", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "blob")
		if err := os.WriteFile(src, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(src, 17<<20); err != nil {
			t.Fatal(err)
		}
		pb := writePlaybook(t, `
- name: blob
  hosts: all
  tasks:
    - name: copy a blob
      copy:
        dest: /etc/containerd/blob
        src: `+src+`
`)
		r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
		wantCode(t, r, 1)
		if !strings.Contains(r.stdout, "read src "+src+": too large: 17825792 bytes, over the limit of 16 MiB") {
			t.Fatalf("want the src and the limit named:\n%s", r)
		}
		if _, err := os.Stat(l.NodePath(node, "/etc/containerd/blob")); !os.IsNotExist(err) {
			t.Errorf("the node got the blob: %v", err)
		}
	})
}

// TestFaultProxyCommandInInventory (issue 11, minor): a ProxyCommand in
// ansible_ssh_common_args is a shell command taken from an inventory
// variable: the host is refused with a message saying so, instead of the
// option being ignored and the node reached directly.
func TestFaultProxyCommandInInventory(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	n := l.Nodes[0]
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	body := fmt.Sprintf(`all:
  hosts:
    %s:
      ansible_host: %s
      ansible_port: %d
      ansible_user: root
      ansible_ssh_private_key_file: %s
      ansible_ssh_common_args: '-o ProxyCommand="ssh -W %%h:%%p -q bastion.invalid"'
`, n.Name, n.Addr, n.Port, l.KeyFile)
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	pb := writePlaybook(t, `
- name: motd
  hosts: all
  tasks:
    - name: motd
      copy:
        dest: /etc/containerd/motd
        content: "hi\n"
`)
	r := nc(t, "apply", "-i", inv, "--known-hosts", l.KnownHosts, "--ssh-config", "/dev/null", pb)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, n.Name+": ansible_ssh_common_args sets ProxyCommand") {
		t.Fatalf("want the host refused naming ProxyCommand:\n%s", r)
	}
	if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/motd")); !os.IsNotExist(err) {
		t.Errorf("the node was reached without its ProxyCommand: %v", err)
	}
}
