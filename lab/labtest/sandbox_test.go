package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sandboxConfig is what the incident's nodes say about runc and the nvidia runtimes that matters to a
// sandbox: systemd cgroups (there is no systemd here) and a BinaryName that is the toolkit's runtime.
func sandboxConfig(version int) string {
	plugin := "io.containerd.grpc.v1.cri"
	if version >= 3 {
		plugin = "io.containerd.cri.v1.runtime"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "version = %d\n", version)
	for _, rt := range []struct{ name, bin string }{{"runc", ""}, {"nvidia", "/usr/local/nvidia/toolkit/nvidia-container-runtime"}} {
		fmt.Fprintf(&b, "[plugins.%q.containerd.runtimes.%s]\n  runtime_type = \"io.containerd.runc.v2\"\n", plugin, rt.name)
		fmt.Fprintf(&b, "  [plugins.%q.containerd.runtimes.%s.options]\n    SystemdCgroup = true\n", plugin, rt.name)
		if rt.bin != "" {
			fmt.Fprintf(&b, "    BinaryName = %q\n", rt.bin)
		}
	}
	return b.String()
}

// TestSandboxesStart: on every generation a lab node runs real host-network pod sandboxes with the real
// CRI plugin, shim and runc, through runc and through an nvidia-container-runtime stand-in, from the
// sandbox image the lab imported (no registry): the runc stand-in turned systemd cgroups into cgroupfs
// ones and raised the sandbox's oom_score_adj, the nvidia stand-in logged its calls, and `down` leaves
// no container process or cgroup of the node behind.
func TestSandboxesStart(t *testing.T) {
	for _, g := range []struct {
		gen     Generation
		version int
	}{{Containerd16, 2}, {Containerd17, 2}, {Containerd2, 3}} {
		t.Run(string(g.gen), func(t *testing.T) {
			t.Parallel()
			l := Start(t, Options{Nodes: 1, Scenario: "clean", ContainerdBin: Containerd(t, g.gen)})
			n := l.Nodes[0].Name
			if err := os.WriteFile(l.NodePath(n, "/etc/containerd/config.toml"), []byte(sandboxConfig(g.version)), 0o644); err != nil {
				t.Fatal(err)
			}
			l.Exec(t, n, "systemctl", "restart", "containerd")
			l.InstallCrictl(t, n)
			cr := []string{"crictl", "--runtime-endpoint", "unix:///run/containerd/containerd.sock", "--timeout", "60s"}
			for _, h := range []string{"runc", "nvidia"} {
				// A slice cgroup parent, as the proof sends for the config's
				// SystemdCgroup: runc refuses a sandbox without one, and so does the lab's.
				cfg := fmt.Sprintf(`{"metadata":{"name":"lab-%s","uid":"lab-%s","namespace":"labtest"},"linux":{"cgroup_parent":"nodeconverge-proof.slice","security_context":{"namespace_options":{"network":2}}}}`, h, h)
				id := strings.TrimSpace(l.Exec(t, n, "sh", "-c", `printf '%s' "$0" | crictl --runtime-endpoint unix:///run/containerd/containerd.sock --timeout 60s runp --runtime "$1" /dev/stdin 2>/dev/null`, cfg, h))
				if id == "" {
					t.Fatalf("runp through %s gave no sandbox id", h)
				}
				st := strings.TrimSpace(l.Exec(t, n, append(cr, "inspectp", "-o", "go-template", "--template", "{{.status.state}}", id)...))
				if st != "SANDBOX_READY" {
					t.Errorf("sandbox through %s is %q, want SANDBOX_READY", h, st)
				}
				// The pause stand-in runs in a cgroup of the node's own subtree.
				pid := strings.TrimSpace(l.Exec(t, n, append(cr, "inspectp", "-o", "go-template", "--template", "{{.info.pid}}", id)...))
				cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
				if err != nil || !strings.Contains(string(cg), "/nodeconverge-lab/") {
					t.Errorf("sandbox through %s (pid %s) is not in the lab's cgroups: %q %v", h, pid, cg, err)
				}
				l.Exec(t, n, append(cr, "stopp", id)...)
				l.Exec(t, n, append(cr, "rmp", id)...)
			}
			log, err := os.ReadFile(l.NodePath(n, "/usr/local/nvidia/toolkit/invocations.log"))
			if err != nil || !strings.Contains(string(log), "nvidia-container-runtime ") || !strings.Contains(string(log), " create ") {
				t.Errorf("the nvidia stand-in's log does not show a create: %q %v", log, err)
			}
			runcLog := readFile(t, n2p(l, n, "runc.log"))
			for _, want := range []string{"dropped --systemd-cgroup", "oomScoreAdj -998 ->", `cgroupsPath "`} {
				if !strings.Contains(runcLog, want) {
					t.Errorf("the runc stand-in's log does not say %q:\n%s", want, runcLog)
				}
			}
			if left := l.Containers(t, n); len(left) > 0 {
				t.Errorf("containers left: %v", left)
			}
			// A sandbox left running (a killed proof) does not outlive the lab: its process is in a
			// mount namespace of its own, found by its cgroup.
			cfg := `{"metadata":{"name":"lab-left","uid":"lab-left","namespace":"labtest"},"linux":{"cgroup_parent":"nodeconverge-proof.slice","security_context":{"namespace_options":{"network":2}}}}`
			id := strings.TrimSpace(l.Exec(t, n, "sh", "-c", `printf '%s' "$0" | crictl --runtime-endpoint unix:///run/containerd/containerd.sock --timeout 60s runp /dev/stdin 2>/dev/null`, cfg))
			pid := strings.TrimSpace(l.Exec(t, n, append(cr, "inspectp", "-o", "go-template", "--template", "{{.info.pid}}", id)...))
			if out, err := exec.Command(l.script, "down", "--dir", l.Dir).CombinedOutput(); err != nil {
				t.Fatalf("lab.sh down: %v\n%s", err, out)
			}
			if st, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && !strings.Contains(string(st), ") Z") {
				t.Errorf("the left sandbox's process %s survived down: %s", pid, st)
			}
			if dirs, _ := filepath.Glob("/sys/fs/cgroup/*/nodeconverge-lab/" + filepath.Base(l.Dir)); len(dirs) > 0 {
				t.Errorf("down left the node's cgroups: %v", dirs)
			}
		})
	}
}

// n2p is a file of the node's lab bookkeeping (not a path the node sees).
func n2p(l *Lab, node, name string) string { return l.Dir + "/nodes/" + node + "/" + name }
