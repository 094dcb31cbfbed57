// Package labtest starts the local lab (lab/lab.sh) for end-to-end tests: N nodes, each an sshd on its
// own loopback address inside its own mount namespace, with a real containerd behind a systemctl
// stand-in. Tests get the inventory, known_hosts and key to point nodeconverge at, and helpers to look
// inside a node.
//
// It imports nothing else from this repository so that every package can use it. The lab needs root.
package labtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DefaultPort is the port every lab sshd listens on; lab.sh's default, clear of a host sshd on 22.
const DefaultPort = 2222

// upTimeout bounds `lab.sh up`. A 4-node lab takes about a second on an idle
// machine; the corpus matrix's 63-node lab next to a 1000-node lab going
// down (load 500 here) did not finish in 3 minutes. The bound is for a lab
// that hangs, not for a slow machine.
const upTimeout = 10 * time.Minute

// Lab is a running lab. All paths are absolute host paths.
type Lab struct {
	Dir        string // the lab directory (removed at cleanup unless the test failed)
	Inventory  string // Ansible YAML inventory: group gpu with every node
	KnownHosts string // known_hosts with every node's host key ([addr]:port entries)
	KeyFile    string // private key accepted by every node for root
	Nodes      []Node
	script     string
}

// Node is one lab node.
type Node struct {
	Name string
	Addr string
	Port int
	Root string // DIR/nodes/NAME: the node's bind-mounted paths live below it at their own paths
}

// Options says what lab to start. The zero value (apart from Nodes) gives lab.sh's defaults.
type Options struct {
	Nodes         int      // number of nodes; 4 gives nuc1,nuc2,omen,omen2, others node01..nodeNN
	Names         []string // explicit node names (overrides the default names; Nodes may be 0)
	Scenario      string   // "incident", "clean" or "none"; "" = incident for nuc1..omen2, else clean
	NoContainerd  bool     // do not start containerd at up (scale tests)
	ContainerdBin string   // containerd binary to run on the nodes (e.g. a 2.x build); "" = PATH's
}

// mountedPrefixes are the node paths that lab.sh bind-mounts from the node's Root; everything else a
// node sees is the host's own file. Keep in sync with MOUNTED_DIRS and PROC_FILES in lab.sh.
var mountedPrefixes = []string{
	"/etc/containerd", "/etc/sysctl.d", "/etc/cni/net.d", "/run/containerd", "/run/nri", "/var/lib/containerd",
	"/var/lib/nodeconverge", "/root", "/usr/local/sbin", "/usr/local/nvidia",
	"/proc/sys/fs/inotify/max_user_instances", "/proc/sys/fs/inotify/max_user_watches",
	"/etc/modules-load.d", "/etc/modprobe.d", "/etc/systemd/system", "/run/systemd", "/lib/modules",
	"/proc/modules", "/proc/1/comm",
}

// RepoRoot returns the repository root, found from this source file's location so tests in any package
// (any working directory) find lab/lab.sh.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("labtest: runtime.Caller failed; cannot locate the repository")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Script returns the path of lab.sh.
func Script() string { return filepath.Join(RepoRoot(), "lab", "lab.sh") }

// Start brings up a lab and registers its teardown with t.Cleanup. Every call gets its own 127.X.Y.0/24
// (checked free on the lab port), so parallel test binaries do not collide. The directory lives under
// /tmp with a short name because unix socket paths are limited to 108 bytes.
func Start(t testing.TB, o Options) *Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("labtest: the lab needs root (mount namespaces, sshd); running as uid %d", os.Geteuid())
	}
	n := o.Nodes
	if len(o.Names) > 0 {
		n = len(o.Names)
	}
	if n < 1 {
		t.Fatalf("labtest: Options.Nodes or Options.Names must ask for at least one node")
	}
	dir, err := os.MkdirTemp("/tmp", "ncl-")
	if err != nil {
		t.Fatalf("labtest: create lab dir: %v", err)
	}
	netPrefix, err := pickNet(n, DefaultPort)
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	args := []string{"up", "--dir", dir, "--net", netPrefix, "--port", strconv.Itoa(DefaultPort)}
	if len(o.Names) > 0 {
		args = append(args, "--names", strings.Join(o.Names, ","))
	} else {
		args = append(args, "--nodes", strconv.Itoa(n))
	}
	if o.Scenario != "" {
		args = append(args, "--scenario", o.Scenario)
	}
	if o.NoContainerd {
		args = append(args, "--no-containerd")
	}
	if o.ContainerdBin != "" {
		args = append(args, "--containerd-bin", o.ContainerdBin)
	}
	l := &Lab{Dir: dir, script: Script()}
	// Cleanup first, so a half-started lab is torn down too.
	t.Cleanup(func() { l.down(t) })

	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.script, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("labtest: lab.sh %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	if err := l.load(); err != nil {
		t.Fatalf("labtest: %v", err)
	}
	return l
}

func (l *Lab) down(t testing.TB) {
	t.Helper()
	args := []string{"down", "--dir", l.Dir}
	if !t.Failed() {
		args = append(args, "--purge")
	}
	out, err := exec.Command(l.script, args...).CombinedOutput()
	if err != nil {
		t.Errorf("labtest: lab.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		return
	}
	if t.Failed() {
		t.Logf("labtest: lab stopped; its files are kept for inspection in %s", l.Dir)
	}
}

// load reads lab.env, the file lab.sh writes, rather than recomputing addresses here.
func (l *Lab) load() error {
	p := filepath.Join(l.Dir, "lab.env")
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("read lab env: %w", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("parse %s: bad line %q", p, line)
		}
		env[k] = strings.Trim(v, "'")
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	port, err := strconv.Atoi(env["LAB_PORT"])
	if err != nil {
		return fmt.Errorf("parse %s: LAB_PORT: %w", p, err)
	}
	l.Inventory, l.KnownHosts, l.KeyFile = env["LAB_INVENTORY"], env["LAB_KNOWN_HOSTS"], env["LAB_KEY"]
	for _, kv := range strings.Fields(env["LAB_NODE_ADDRS"]) {
		name, addr, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("parse %s: bad LAB_NODE_ADDRS entry %q", p, kv)
		}
		l.Nodes = append(l.Nodes, Node{Name: name, Addr: addr, Port: port, Root: filepath.Join(l.Dir, "nodes", name)})
	}
	if len(l.Nodes) == 0 {
		return fmt.Errorf("parse %s: no nodes", p)
	}
	return nil
}

// pickNet chooses a random 127.X.Y prefix whose first n lab addresses are free on port. Binding each
// address is the check: it fails if another lab (or anything else) already listens there.
func pickNet(n, port int) (string, error) {
	var lastErr error
	for range 50 {
		prefix := fmt.Sprintf("127.%d.%d", 40+rand.IntN(200), rand.IntN(250))
		if lastErr = addrsFree(prefix, n, port); lastErr == nil {
			return prefix, nil
		}
	}
	return "", fmt.Errorf("no free 127.x.y net for %d nodes on port %d: %w", n, port, lastErr)
}

func addrsFree(prefix string, n, port int) error {
	for i := 1; i <= n; i++ {
		addr := nodeAddr(prefix, i)
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("probe %s:%d: %w", addr, port, err)
		}
		if err := ln.Close(); err != nil {
			return fmt.Errorf("close probe %s:%d: %w", addr, port, err)
		}
	}
	return nil
}

// nodeAddr mirrors lab.sh's addr_for: host part i+10, carrying into the third octet past .254.
func nodeAddr(prefix string, i int) string {
	parts := strings.Split(prefix, ".")
	c, _ := strconv.Atoi(parts[2]) // pickNet formats it; cannot fail
	h := i + 10
	for h > 254 {
		h -= 254
		c++
	}
	return fmt.Sprintf("%s.%s.%d.%d", parts[0], parts[1], c, h)
}

// Node returns the named node; it fails the test when there is none.
func (l *Lab) Node(t testing.TB, name string) Node {
	t.Helper()
	for _, n := range l.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("labtest: no node %q in lab %s", name, l.Dir)
	return Node{}
}

// TryExec runs cmd inside the node's mount namespace (as root, PATH as sshd gives it, cwd /) and
// returns its stdout; the error carries the exit status and stderr. For commands expected to fail.
func (l *Lab) TryExec(node string, cmd ...string) (string, error) {
	args := append([]string{"exec", "--dir", l.Dir, node, "--"}, cmd...)
	c := exec.Command(l.script, args...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return stdout.String(), fmt.Errorf("exec on %s %q: %w\nstderr: %s", node, cmd, err, stderr.String())
	}
	return stdout.String(), nil
}

// Exec runs cmd inside the node's mount namespace and returns its stdout; any failure fails the test.
func (l *Lab) Exec(t testing.TB, node string, cmd ...string) string {
	t.Helper()
	out, err := l.TryExec(node, cmd...)
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	return out
}

// NodePath returns the host path of the file the node sees at abs: below the node's Root for the
// paths the lab bind-mounts per node (/etc/containerd, /root, /run/containerd, ...), abs itself for
// everything else (the node shares the host's file).
func (l *Lab) NodePath(node, abs string) string {
	abs = filepath.Clean(abs)
	for _, p := range mountedPrefixes {
		if abs == p || strings.HasPrefix(abs, p+"/") {
			return filepath.Join(l.Dir, "nodes", node, abs)
		}
	}
	return abs
}

// StopSSHD makes the node unreachable: its sshd (listener and sessions) is stopped, containerd and the
// node's files stay.
func (l *Lab) StopSSHD(t testing.TB, node string) {
	t.Helper()
	l.run(t, "stop-sshd", "--dir", l.Dir, node)
}

// StartSSHD starts the node's sshd again and returns once it accepts connections.
func (l *Lab) StartSSHD(t testing.TB, node string) {
	t.Helper()
	l.run(t, "start-sshd", "--dir", l.Dir, node)
}

func (l *Lab) run(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(l.script, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("labtest: lab.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// HashTree returns "sha256:<hex>" for every regular file and "symlink:<target>" for every symlink under
// the node's /etc (its per-node parts: containerd, sysctl.d, cni), keyed by the path the node sees
// ("/etc/containerd/config.toml"). Two equal maps mean byte-identical trees.
func (l *Lab) HashTree(t testing.TB, node string) map[string]string {
	t.Helper()
	root := filepath.Join(l.Dir, "nodes", node)
	sums := map[string]string{}
	err := filepath.WalkDir(filepath.Join(root, "etc"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return fmt.Errorf("relative path of %s: %w", p, err)
		}
		key := "/" + filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", p, err)
			}
			sums[key] = "symlink:" + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			s := sha256.Sum256(b)
			sums[key] = "sha256:" + hex.EncodeToString(s[:])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("labtest: hash tree of node %s: %v", node, err)
	}
	return sums
}

// ImportSandboxImage imports the lab's sandbox image (the pause stand-in, under the usual
// registry.k8s.io/pause tags) into the node's containerd, for a node whose daemon was not running at
// `up` (scenario none, NoContainerd, omen's refused config) and now is.
func (l *Lab) ImportSandboxImage(t testing.TB, node string) {
	t.Helper()
	l.run(t, "import-image", "--dir", l.Dir, node)
}

// Containers lists the ids of the containers (pod sandboxes included) in the node's containerd, in
// the CRI's namespace: what a proof must leave empty.
func (l *Lab) Containers(t testing.TB, node string) []string {
	t.Helper()
	return strings.Fields(l.Exec(t, node, "ctr", "-n", "k8s.io", "containers", "ls", "-q"))
}

// ActiveSnapshots lists the node's active (writable) snapshots in the CRI's namespace: a container
// or sandbox that was not removed leaves one; image layers are committed snapshots and do not count.
func (l *Lab) ActiveSnapshots(t testing.TB, node string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(l.Exec(t, node, "ctr", "-n", "k8s.io", "snapshots", "ls"), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[len(f)-1] == "Active" {
			out = append(out, f[0])
		}
	}
	return out
}
