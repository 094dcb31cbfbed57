package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

const probePlay = `
- name: probe
  hosts: all
  tasks:
    - name: read a file
      copy:
        dest: /etc/containerd/probe
        content: "reached\n"
`

// knownHostsWithout copies the lab's known_hosts without the lines of the
// given address.
func knownHostsWithout(t *testing.T, l *labtest.Lab, n labtest.Node) (path string, removed []string) {
	t.Helper()
	b, err := os.ReadFile(l.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, fmt.Sprintf("[%s]:%d ", n.Addr, n.Port)) {
			removed = append(removed, line)
			continue
		}
		keep = append(keep, line)
	}
	if len(removed) == 0 {
		t.Fatalf("no known_hosts line for %s:%d in %s", n.Addr, n.Port, l.KnownHosts)
	}
	path = filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, removed
}

func args(l *labtest.Lab, knownHosts string, extra ...string) []string {
	return append([]string{"apply", "-i", l.Inventory, "--known-hosts", knownHosts, "--ssh-config", "/dev/null"}, extra...)
}

// TestHostKeys: an unknown host is refused with its fingerprint unless
// --accept-new-host-keys, which records it; a changed key is refused even
// then, and the refused node is not touched.
func TestHostKeys(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	pb := writePlaybook(t, probePlay)
	n := l.Nodes[0]

	kh, _ := knownHostsWithout(t, l, n)
	r := nc(t, args(l, kh, pb)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "failed: ["+n.Name+"]") || !strings.Contains(r.stdout, "SHA256:") || !strings.Contains(r.stdout, "--accept-new-host-keys") {
		t.Fatalf("unknown host key should be refused with fingerprint and the way to accept it:\n%s", r)
	}
	if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/probe")); err == nil {
		t.Fatalf("refused node was written")
	}

	r = nc(t, args(l, kh, "--accept-new-host-keys", pb)...)
	wantCode(t, r, 0)
	b, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), fmt.Sprintf("[%s]:%d", n.Addr, n.Port)) {
		t.Fatalf("accept-new did not record the key:\n%s", b)
	}

	// A different key for the same address: the node's key "changed".
	keyDir := t.TempDir()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(keyDir, "k")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(filepath.Join(keyDir, "k.pub"))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := knownHostsWithout(t, l, n)
	f, err := os.OpenFile(other, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(pub))
	if _, err := fmt.Fprintf(f, "[%s]:%d %s %s\n", n.Addr, n.Port, fields[0], fields[1]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(l.NodePath(n.Name, "/etc/containerd/probe")); err != nil {
		t.Fatal(err)
	}
	r = nc(t, args(l, other, "--accept-new-host-keys", pb)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "failed: ["+n.Name+"]") || !strings.Contains(strings.ToLower(r.stdout), "changed") {
		t.Fatalf("a changed host key must be refused:\n%s", r)
	}
	if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/probe")); err == nil {
		t.Fatalf("node with a changed key was written")
	}
}

// TestProxyJump: nodes reachable only through a bastion. The target's name
// resolves only inside the bastion's namespace (its own /etc/hosts), so a
// direct connection cannot succeed and a converged node proves the jump.
func TestProxyJump(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	bastion, target := l.Nodes[0], l.Nodes[1]
	hosts := l.NodePath(bastion.Name, "/etc/containerd") + "/hosts.lab"
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+target.Addr+" gpu-internal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Exec(t, bastion.Name, "mount", "--bind", "/etc/containerd/hosts.lab", "/etc/hosts")

	inv := filepath.Join(t.TempDir(), "inv.yaml")
	body := fmt.Sprintf(`all:
  hosts:
    behind:
      ansible_host: gpu-internal
      ansible_port: %d
      ansible_user: root
      ansible_ssh_private_key_file: %s
      ansible_ssh_common_args: "-o ProxyJump=root@%s:%d"
`, target.Port, l.KeyFile, bastion.Addr, bastion.Port)
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// The bastion's key is known; the jumped host's name is new, so it is
	// recorded with accept-new (its key is still verified on later runs).
	kh := filepath.Join(t.TempDir(), "known_hosts")
	b, err := os.ReadFile(l.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kh, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The bastion authenticates with the target's key file: the lab uses
	// one key for every node.
	r := nc(t, "apply", "-i", inv, "--known-hosts", kh, "--ssh-config", "/dev/null", "--accept-new-host-keys", writePlaybook(t, probePlay))
	wantCode(t, r, 0)
	if got, err := os.ReadFile(l.NodePath(target.Name, "/etc/containerd/probe")); err != nil || string(got) != "reached\n" {
		t.Fatalf("target not converged through the bastion (%v): %q\n%s", err, got, r)
	}
}

// TestInventoryList prints the resolved lab inventory as JSON.
func TestInventoryList(t *testing.T) {
	inv := filepath.Join(labtest.RepoRoot(), "inventories", "lab.yaml")
	r := nc(t, "inventory", "-i", inv, "--list")
	wantCode(t, r, 0)
	var out struct {
		Meta struct {
			Hostvars map[string]map[string]any `json:"hostvars"`
		} `json:"_meta"`
		GPU struct {
			Hosts []string `json:"hosts"`
		} `json:"gpu"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("inventory --list: %v\n%s", err, r.stdout)
	}
	if strings.Join(out.GPU.Hosts, ",") != "nuc1,nuc2,omen,omen2" || out.Meta.Hostvars["omen"]["ansible_host"] != "127.30.0.13" {
		t.Fatalf("unexpected inventory: %+v", out)
	}
}

// TestBadInputNamesPosition: malformed files fail before any connection,
// with file:line:col, and never panic.
func TestBadInputNamesPosition(t *testing.T) {
	inv := filepath.Join(labtest.RepoRoot(), "inventories", "lab.yaml")
	for _, tc := range []struct{ body, want string }{
		{"- name: x\n  hosts: all\n  tasks:\n    - name: t\n      coppy: {dest: /x, content: y}\n", `:5:7: unknown module "coppy"`},
		{"- name: x\n  hostss: all\n", ":2:3:"},
		{"- name: x\n  hosts: all\n  tasks:\n    - name: t\n      copy: {dest: /x, content: \"{{ nope }}\"}\n", "undefined variable"},
	} {
		r := nc(t, "apply", "-i", inv, "--known-hosts", "/dev/null", writePlaybook(t, tc.body))
		wantCode(t, r, 1)
		if !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "panic") {
			t.Errorf("want %q in stderr:\n%s", tc.want, r)
		}
	}
}
