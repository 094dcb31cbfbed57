package labtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sshRun runs cmd on the node with the OpenSSH client, verifying the host key against the lab's
// known_hosts, the way an operator (or Ansible) would reach the node.
func sshRun(l *Lab, n Node, cmd string) (string, error) {
	c := exec.Command("ssh", "-F", "/dev/null", "-i", l.KeyFile,
		"-o", "UserKnownHostsFile="+l.KnownHosts, "-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
		"-p", strconv.Itoa(n.Port), "root@"+n.Addr, cmd)
	out, err := c.CombinedOutput()
	return string(out), err
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func TestIncidentLab(t *testing.T) {
	t.Parallel()
	l := Start(t, Options{Nodes: 4})
	if got := len(l.Nodes); got != 4 {
		t.Fatalf("lab has %d nodes, want 4", got)
	}
	for i, want := range []string{"nuc1", "nuc2", "omen", "omen2"} {
		if l.Nodes[i].Name != want {
			t.Fatalf("node %d is %q, want %q", i, l.Nodes[i].Name, want)
		}
	}

	t.Run("openssh client reaches each node's own files", func(t *testing.T) {
		for _, n := range l.Nodes {
			const f = "/etc/containerd/conf.d/zz-labhub-registry.toml"
			// Mark the node's copy so the test proves it reads this node's file, not a shared one.
			marker := "# node " + n.Name + "\n"
			p := l.NodePath(n.Name, f)
			if err := os.WriteFile(p, []byte(readFile(t, p)+marker), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := sshRun(l, n, "cat "+f)
			if err != nil {
				t.Fatalf("ssh %s: %v\n%s", n.Name, err, out)
			}
			if !strings.Contains(out, `config_path = "/etc/containerd/certs.d"`) || !strings.HasSuffix(out, marker) {
				t.Errorf("ssh %s cat %s = %q, want the registry drop-in ending in %q", n.Name, f, out, marker)
			}
		}
	})

	t.Run("root has no shell startup files and PATH finds the stand-ins", func(t *testing.T) {
		out, err := sshRun(l, l.Nodes[0], `ls -A /root; command -v systemctl; command -v journalctl; command -v modprobe; command -v lsmod`)
		if err != nil {
			t.Fatalf("ssh: %v\n%s", err, out)
		}
		want := ".ssh\n/usr/local/sbin/systemctl\n/usr/local/sbin/journalctl\n/usr/local/sbin/modprobe\n/usr/local/sbin/lsmod\n"
		if _, err := os.Stat("/proc/modules"); err != nil {
			// A kernel without loadable modules: the /proc/modules stand-in
			// for the node's Python lives in root's .local (no shell reads it).
			want = ".local\n" + want
		}
		if out != want {
			t.Errorf("got %q, want %q", out, want)
		}
	})

	t.Run("nodes are isolated from each other and from the host", func(t *testing.T) {
		const f = "/etc/containerd/isolation-probe"
		l.Exec(t, "nuc1", "sh", "-c", "echo nuc1 > "+f)
		if got := readFile(t, l.NodePath("nuc1", f)); got != "nuc1\n" {
			t.Errorf("nuc1's file on the host = %q", got)
		}
		if out, err := l.TryExec("nuc2", "cat", f); err == nil {
			t.Errorf("nuc2 sees nuc1's file: %q", out)
		}
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("host sees node file %s (stat err %v)", f, err)
		}
	})

	t.Run("the incident is reproduced by the real containerd", func(t *testing.T) {
		dump := "containerd --config /etc/containerd/config.toml config dump | grep -c runtimes.nvidia || true"
		if got := strings.TrimSpace(l.Exec(t, "nuc2", "sh", "-c", dump)); got != "0" {
			t.Errorf("nuc2 effective runtimes.nvidia lines = %s, want 0 (zz- drop-in resets cri)", got)
		}
		// The ablation on one node: without zz- the operator's drop-in is in effect again.
		l.Exec(t, "omen2", "mv", "/etc/containerd/conf.d/zz-labhub-registry.toml", "/root/")
		if got := strings.TrimSpace(l.Exec(t, "omen2", "sh", "-c", dump)); got != "6" {
			t.Errorf("omen2 without zz-: runtimes.nvidia lines = %s, want 6", got)
		}
		out, err := l.TryExec("omen", "containerd", "--config", "/etc/containerd/config.toml", "config", "dump")
		if err == nil || !strings.Contains(err.Error(), "duplicated tables") {
			t.Errorf("omen config dump: err %v, out %q; want duplicated tables", err, out)
		}
		if got := strings.TrimSpace(l.Exec(t, "nuc1", "sh", "-c", "systemctl is-active containerd")); got != "active" {
			t.Errorf("nuc1 containerd is %q, want active", got)
		}
		out, err = l.TryExec("omen", "systemctl", "is-active", "containerd")
		if err == nil || strings.TrimSpace(out) != "failed" {
			t.Errorf("omen containerd is-active = %q (err %v), want failed with non-zero exit", out, err)
		}
		if log := l.Exec(t, "omen", "journalctl", "-u", "containerd", "--no-pager"); !strings.Contains(log, "duplicated tables") {
			t.Errorf("omen containerd log lacks the TOML error:\n%s", log)
		}
	})

	t.Run("systemctl stand-in stops and starts the node's containerd", func(t *testing.T) {
		ping := []string{"timeout", "10", "ctr", "--address", "/run/containerd/containerd.sock", "--connect-timeout", "1s", "version"}
		l.Exec(t, "nuc2", ping...)
		l.Exec(t, "nuc2", "systemctl", "stop", "containerd")
		if out, err := l.TryExec("nuc2", ping...); err == nil {
			t.Errorf("ctr version works on nuc2 after stop:\n%s", out)
		}
		out, err := l.TryExec("nuc2", "systemctl", "is-active", "containerd")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 || strings.TrimSpace(out) != "inactive" {
			t.Errorf("is-active after stop = %q (err %v), want inactive, exit 3 as systemd", out, err)
		}
		// nuc1's daemon is another process and keeps running.
		l.Exec(t, "nuc1", ping...)
		// Over SSH, as the engine will do it: the session must end although the daemon keeps running.
		start := time.Now()
		if out, err := sshRun(l, l.Node(t, "nuc2"), "systemctl start containerd && systemctl is-active containerd"); err != nil || out != "active\n" {
			t.Fatalf("ssh systemctl start: %v\n%s", err, out)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("ssh systemctl start took %v: the session waited for the daemon", d)
		}
		l.Exec(t, "nuc2", ping...)
	})

	t.Run("inotify sysctl files are per node", func(t *testing.T) {
		const p = "/proc/sys/fs/inotify/max_user_instances"
		host := readFile(t, p)
		out := l.Exec(t, "nuc1", "sysctl", "-w", "fs.inotify.max_user_instances=8192")
		if !strings.Contains(out, "8192") {
			t.Errorf("sysctl -w on nuc1 printed %q", out)
		}
		if got := strings.TrimSpace(l.Exec(t, "nuc1", "cat", p)); got != "8192" {
			t.Errorf("nuc1 reads %s = %s, want 8192", p, got)
		}
		if got := strings.TrimSpace(readFile(t, l.NodePath("nuc1", p))); got != "8192" {
			t.Errorf("nuc1's backing file = %s, want 8192", got)
		}
		if got := strings.TrimSpace(l.Exec(t, "nuc2", "sysctl", "-n", "fs.inotify.max_user_instances")); got != "128" {
			t.Errorf("nuc2 max_user_instances = %s, want 128", got)
		}
		if got := readFile(t, p); got != host {
			t.Errorf("host %s changed from %q to %q", p, host, got)
		}
	})

	t.Run("a node can be made unreachable and back", func(t *testing.T) {
		n := l.Node(t, "omen2")
		l.StopSSHD(t, n.Name)
		if out, err := sshRun(l, n, "true"); err == nil {
			t.Fatalf("ssh to omen2 works with its sshd stopped:\n%s", out)
		}
		l.StartSSHD(t, n.Name)
		// State survives: the ablation above moved zz- into omen2's /root.
		if out, err := sshRun(l, n, "ls /root"); err != nil || out != "zz-labhub-registry.toml\n" {
			t.Errorf("ssh omen2 after restart: %v %q", err, out)
		}
	})

	t.Run("HashTree tells identical trees from different ones", func(t *testing.T) {
		a, b := l.HashTree(t, "nuc2"), l.HashTree(t, "omen")
		if len(a) == 0 {
			t.Fatal("HashTree(nuc2) is empty")
		}
		if _, ok := a["/etc/containerd/conf.d/99-nvidia.toml"]; !ok {
			t.Errorf("HashTree keys are not node paths: %v", a)
		}
		if a["/etc/containerd/config.toml"] == b["/etc/containerd/config.toml"] {
			t.Error("nuc2 and omen config.toml hash equal; omen's has the duplicated block")
		}
		if a["/etc/containerd/conf.d/99-nvidia.toml"] != b["/etc/containerd/conf.d/99-nvidia.toml"] {
			t.Error("nuc2 and omen 99-nvidia.toml differ; the scenario writes the same file")
		}
		before := l.HashTree(t, "nuc2")
		l.Exec(t, "nuc2", "touch", "/etc/sysctl.d/99-inotify.conf")
		if after := l.HashTree(t, "nuc2"); len(after) != len(before)+1 {
			t.Errorf("new file not in HashTree: %d -> %d entries", len(before), len(after))
		}
	})
}

func TestNodePath(t *testing.T) {
	// A path only: NodePath maps names and touches no file.
	l := &Lab{Dir: "/labs/ncl-x"}
	for abs, want := range map[string]string{
		"/etc/containerd/config.toml":            "/labs/ncl-x/nodes/n1/etc/containerd/config.toml",
		"/etc/containerd":                        "/labs/ncl-x/nodes/n1/etc/containerd",
		"/proc/sys/fs/inotify/max_user_watches":  "/labs/ncl-x/nodes/n1/proc/sys/fs/inotify/max_user_watches",
		"/usr/local/sbin/systemctl":              "/labs/ncl-x/nodes/n1/usr/local/sbin/systemctl",
		"/etc/containerd-other/x":                "/etc/containerd-other/x",
		"/usr/bin/containerd":                    "/usr/bin/containerd",
		"/var/lib/nodeconverge/../containerd/xx": "/labs/ncl-x/nodes/n1/var/lib/containerd/xx",
	} {
		if got := l.NodePath("n1", abs); got != want {
			t.Errorf("NodePath(n1, %s) = %s, want %s", abs, got, want)
		}
	}
}

// labPids lists the processes in the mount namespaces of the lab's nodes.
func labPids(t *testing.T, l *Lab) []string {
	t.Helper()
	ns := map[string]bool{}
	for _, n := range l.Nodes {
		b, err := os.ReadFile(filepath.Join(n.Root, "mntns"))
		if err != nil {
			t.Fatalf("read namespace id of %s: %v", n.Name, err)
		}
		ns[strings.TrimSpace(string(b))] = true
	}
	mark := "/" + filepath.Base(l.Dir) + "/nodes/"
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		link, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt"))
		if err != nil || !ns[link] {
			continue
		}
		// A namespace id is an inode number the kernel reuses once the
		// namespace is gone: after down, a node of a lab another test
		// starts meanwhile can get the same id. A process of this lab sees
		// this lab's node directories mounted (as lab.sh down checks too).
		mi, err := os.ReadFile(filepath.Join("/proc", e.Name(), "mountinfo"))
		if err == nil && strings.Contains(string(mi), mark) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// liveWithDir reports live (non-zombie) processes whose command line mentions dir.
func liveWithDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 { // gone, or a zombie (empty cmdline)
			continue
		}
		if strings.Contains(string(cmdline), dir) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}

func TestDownEndsEveryProcess(t *testing.T) {
	t.Parallel()
	l := Start(t, Options{Names: []string{"a1", "a2"}, Scenario: "clean"})
	// An SSH session in progress at down time must end too.
	sess := exec.Command("ssh", "-F", "/dev/null", "-i", l.KeyFile, "-o", "UserKnownHostsFile="+l.KnownHosts,
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", strconv.Itoa(l.Nodes[0].Port),
		"root@"+l.Nodes[0].Addr, "echo started; exec sleep 600")
	stdout, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("started\n"))
	if _, err := stdout.Read(buf); err != nil || string(buf) != "started\n" {
		t.Fatalf("session did not start: %q %v", buf, err)
	}

	pids := labPids(t, l)
	// holder + sshd listener + containerd per node, plus the session's sshd and sleep.
	if len(pids) < 2*3+2 {
		t.Fatalf("only %d processes in the lab's namespaces before down: %v", len(pids), pids)
	}
	for range 2 { // down is idempotent
		if out, err := exec.Command(l.script, "down", "--dir", l.Dir).CombinedOutput(); err != nil {
			t.Fatalf("lab.sh down: %v\n%s", err, out)
		}
	}
	if left := labPids(t, l); len(left) != 0 {
		t.Errorf("processes left in the lab's namespaces: %v", left)
	}
	if left := liveWithDir(t, l.Dir); len(left) != 0 {
		t.Errorf("processes mentioning %s still alive:\n%s", l.Dir, strings.Join(left, "\n"))
	}
	if err := sess.Wait(); err == nil {
		t.Error("ssh session survived down with exit status 0")
	}
	if _, err := os.Stat(filepath.Join(l.Dir, "lab.env")); err != nil {
		t.Errorf("down without --purge removed files: %v", err)
	}
}

// TestBuiltGenerationsRun starts a node on each containerd generation the lab builds from a Go module
// and on Debian's: the daemon is the one asked for (its --version), the unit is active, and the CRI
// plugins answer "ok" to the lab's ctr (Debian's 1.6 client), which the stand-in systemctl and the
// health gates use against every generation.
func TestBuiltGenerationsRun(t *testing.T) {
	for _, g := range []struct {
		gen     Generation
		version string // prefix of the version `containerd --version` prints
	}{
		{Containerd16, "1.6."},
		{Containerd17, "v1.7."},
		{Containerd2, "v2."},
	} {
		t.Run(string(g.gen), func(t *testing.T) {
			l := Start(t, Options{Nodes: 1, Scenario: "clean", ContainerdBin: Containerd(t, g.gen)})
			n := l.Nodes[0].Name
			v := strings.Fields(l.Exec(t, n, "containerd", "--version"))
			if len(v) < 3 || !strings.HasPrefix(v[2], g.version) {
				t.Fatalf("node runs containerd %q, want %s*", v, g.version)
			}
			if st := strings.TrimSpace(l.Exec(t, n, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
				t.Fatalf("containerd is %q", st)
			}
			plugins := l.Exec(t, n, "ctr", "--address", "/run/containerd/containerd.sock", "--connect-timeout", "5s", "plugins", "ls")
			cri := 0
			for _, ln := range strings.Split(plugins, "\n") {
				f := strings.Fields(ln)
				if len(f) < 3 || !strings.Contains(f[1], "cri") {
					continue
				}
				cri++
				if f[len(f)-1] != "ok" {
					t.Errorf("CRI plugin %s is %s", f[1], f[len(f)-1])
				}
			}
			if cri == 0 {
				t.Fatalf("ctr lists no CRI plugin:\n%s", plugins)
			}
			// The daemon answers the lab's ctr with its own version, not the client's.
			out := l.Exec(t, n, "ctr", "--address", "/run/containerd/containerd.sock", "version")
			_, server, _ := strings.Cut(out, "Server:")
			if f := strings.Fields(server); len(f) < 2 || f[0] != "Version:" || !strings.HasPrefix(f[1], g.version) {
				t.Errorf("ctr version does not show the server's %s*:\n%s", g.version, out)
			}
		})
	}
}

// TestStandIns: the modprobe stand-in keeps real state per node (a load
// brings its dependencies, counted as used; a used or built-in module is
// not removed; an unknown one is not found), and the systemctl stand-in
// runs a unit file's service as a real process, makes and reads the real
// enable and mask links, and holds a changed unit file back until
// daemon-reload, as systemd does.
func TestStandIns(t *testing.T) {
	l := Start(t, Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
	n, other := l.Nodes[0].Name, l.Nodes[1].Name
	l.Exec(t, n, "modprobe", "br_netfilter")
	if out := l.Exec(t, n, "lsmod"); !regexp.MustCompile(`(?m)^bridge\s+\d+\s+1 br_netfilter$`).MatchString(out) || !strings.Contains(out, "br_netfilter") {
		t.Errorf("lsmod after modprobe br_netfilter:\n%s", out)
	}
	if out := l.Exec(t, other, "lsmod"); strings.Contains(out, "br_netfilter") {
		t.Errorf("the other node sees the module:\n%s", out)
	}
	for _, c := range [][]string{{"modprobe", "-r", "bridge"}, {"modprobe", "-r", "ext4"}, {"modprobe", "no_such_module"}, {"modprobe", "--first-time", "br_netfilter"}} {
		if out, err := l.TryExec(n, c...); err == nil {
			t.Errorf("%v succeeded: %s", c, out)
		}
	}
	l.Exec(t, n, "modprobe", "-r", "br_netfilter")
	if out := l.Exec(t, n, "lsmod"); strings.Contains(out, "bridge") {
		t.Errorf("modprobe -r left an unused dependency:\n%s", out)
	}
	if out := l.Exec(t, n, "/usr/bin/python3", "-c", "print(open('/proc/modules').read())"); !strings.Contains(out, "x_tables") {
		t.Errorf("python on the node reads /proc/modules as %q", out)
	}

	unit := "[Service]\nExecStart=/bin/sleep 1000\n[Install]\nWantedBy=multi-user.target\n"
	l.Exec(t, n, "sh", "-c", "printf '%s' \"$1\" > /etc/systemd/system/demo.service", "sh", unit)
	if out, _ := l.TryExec(n, "systemctl", "is-enabled", "demo"); strings.TrimSpace(out) != "disabled" {
		t.Errorf("is-enabled before enable: %q", out)
	}
	l.Exec(t, n, "systemctl", "enable", "demo")
	if target, err := os.Readlink(l.NodePath(n, "/etc/systemd/system/multi-user.target.wants/demo.service")); err != nil || target != "/etc/systemd/system/demo.service" {
		t.Errorf("enable link: %q %v", target, err)
	}
	l.Exec(t, n, "systemctl", "start", "demo")
	pid := strings.TrimPrefix(strings.TrimSpace(l.Exec(t, n, "systemctl", "show", "-p", "MainPID", "demo")), "MainPID=")
	if b, err := os.ReadFile("/proc/" + pid + "/cmdline"); err != nil || !strings.HasPrefix(string(b), "/bin/sleep") {
		t.Errorf("demo's MainPID %s is not its sleep: %q %v", pid, b, err)
	}
	l.Exec(t, n, "sh", "-c", "echo '# changed' >> /etc/systemd/system/demo.service")
	if out := l.Exec(t, n, "systemctl", "show", "--property=NeedDaemonReload", "demo"); strings.TrimSpace(out) != "NeedDaemonReload=yes" {
		t.Errorf("after a change: %q", out)
	}
	l.Exec(t, n, "systemctl", "daemon-reload")
	if out := l.Exec(t, n, "systemctl", "show", "--property=NeedDaemonReload", "demo"); strings.TrimSpace(out) != "NeedDaemonReload=no" {
		t.Errorf("after daemon-reload: %q", out)
	}
	l.Exec(t, n, "systemctl", "stop", "demo")
	if out, err := l.TryExec(n, "systemctl", "is-active", "demo"); err == nil || strings.TrimSpace(out) != "inactive" {
		t.Errorf("after stop: %q %v", out, err)
	}
	l.Exec(t, n, "systemctl", "mask", "other")
	if out, _ := l.TryExec(n, "systemctl", "is-enabled", "other"); strings.TrimSpace(out) != "masked" {
		t.Errorf("masked: %q", out)
	}
	if _, err := l.TryExec(n, "systemctl", "start", "other"); err == nil {
		t.Error("a masked unit started")
	}
	if out, err := l.TryExec(other, "systemctl", "is-enabled", "demo"); err == nil {
		t.Errorf("the other node has demo: %q", out)
	}

	// The runc stand-in at /usr/sbin/runc too (as e2e's lab-links put it
	// for EKS's BinaryName = "/usr/sbin/runc"): it runs Debian's runc from
	// the node's lab-private path, once, not itself again.
	l.Exec(t, n, "mount", "--bind", "/usr/local/sbin/runc", "/usr/sbin/runc")
	if out := l.Exec(t, n, "/usr/sbin/runc", "--version"); !strings.HasPrefix(out, "runc version") {
		t.Errorf("/usr/sbin/runc --version through the stand-in: %q", out)
	}
	if log := readFile(t, n2p(l, n, "runc.log")); strings.Count(log, "runc --version") != 1 {
		t.Errorf("the stand-in's log does not show one call:\n%s", log)
	}
	if b, err := os.ReadFile("/usr/sbin/runc"); err != nil || bytes.Contains(b, []byte("STAND-IN")) {
		t.Errorf("the machine's /usr/sbin/runc is the stand-in (%v)", err)
	}
}

// TestNoInheritedDescriptor: a lab started under a lock (`flock FILE make test` passes the lock's
// descriptor down) must not keep that descriptor in its long-lived processes, or the lab holds the
// lock for its life: the node's holder and containerd hold none of the caller's descriptors.
func TestNoInheritedDescriptor(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "held.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Inherited by children, as a descriptor flock(1) hands its command is.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_SETFD, 0); errno != 0 {
		t.Fatal(errno)
	}
	l := Start(t, Options{Nodes: 1, Scenario: "clean"})
	nd := filepath.Join(l.Dir, "nodes", l.Nodes[0].Name)
	for _, pf := range []string{"holder.pid", "containerd.pid"} {
		pid := strings.TrimSpace(readFile(t, filepath.Join(nd, pf)))
		fds, err := os.ReadDir("/proc/" + pid + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			if target, _ := os.Readlink("/proc/" + pid + "/fd/" + fd.Name()); target == f.Name() {
				t.Errorf("%s (pid %s) holds the caller's descriptor %s", pf, pid, fd.Name())
			}
		}
	}
}
