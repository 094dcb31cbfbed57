package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// nvidiaInMain is issue 10's minimal case for defect 1: the main config
// defines the nvidia runtimes itself and there is no 99-nvidia.toml yet.
// The shipped playbook strips them from config.toml (task 2) and creates
// them in the drop-in (task 4).
const nvidiaInMain = `version = 2
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    SystemdCgroup = true
`

// TestShippedPlaybookNeverPartial: on the minimal case, on both containerd
// generations, the shipped playbook either converges (exit 0, the nvidia
// runtime effective, a rerun changes nothing) or refuses before any write
// on the node (exit 1, the node's files byte-identical, the refusing task
// named). What it must never do is what issue 10 measured: strip the
// runtimes from config.toml and then stop.
func TestShippedPlaybookNeverPartial(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			if err := os.WriteFile(l.NodePath(node, "/etc/containerd/config.toml"), []byte(nvidiaInMain), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(l.NodePath(node, "/etc/containerd/conf.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(l.NodePath(node, filepath.Join("/etc/containerd/conf.d", "99-nvidia.toml"))); err == nil {
				t.Fatal("the case needs a node without 99-nvidia.toml")
			}
			before := l.HashTree(t, node)
			check := nc(t, append([]string{"apply", "--check"}, labArgs(l, shippedPlaybook())...)...)
			r := nc(t, append([]string{"apply"}, labArgs(l, shippedPlaybook())...)...)
			switch r.code {
			case 0:
				dump := l.Exec(t, node, "containerd", "config", "dump")
				if !strings.Contains(dump, "/usr/local/nvidia/toolkit/nvidia-container-runtime") {
					t.Fatalf("converged without the nvidia runtime in effect:\n%s\n%s", dump, r)
				}
				wantCode(t, nc(t, append([]string{"apply", "--check"}, labArgs(l, shippedPlaybook())...)...), 0)
			case 1:
				if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
					t.Fatalf("refused after writing (-before +after):\n%s\n%s", d, r)
				}
				if !strings.Contains(r.stdout, "nothing was written on this host: task ") {
					t.Fatalf("the refusal must name the task that would fail:\n%s", r)
				}
				// Check mode foresaw it: apply refuses exactly when check does.
				wantCode(t, check, 1)
			default:
				t.Fatalf("want converged (0) or refused before any write (1):\n%s", r)
			}
		})
	}
}
