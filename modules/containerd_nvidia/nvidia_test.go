package containerdnvidia

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/nvidiatoml"
)

// TestSameButZeros: the GPU Operator's file and our rebuild of it differ in
// text (zero-valued fields) but not in meaning; a changed BinaryName or
// option does.
func TestSameButZeros(t *testing.T) {
	op, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "lab", "scenarios", "incident", "99-nvidia.toml"))
	if err != nil {
		t.Fatal(err)
	}
	rts := []nvidiatoml.Runtime{
		{Name: "nvidia", RuntimeType: "io.containerd.runc.v2", BinaryName: "/usr/local/nvidia/toolkit/nvidia-container-runtime", Options: map[string]any{"SystemdCgroup": true}},
		{Name: "nvidia-cdi", RuntimeType: "io.containerd.runc.v2", BinaryName: "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi", Options: map[string]any{"SystemdCgroup": true}},
		{Name: "nvidia-legacy", RuntimeType: "io.containerd.runc.v2", BinaryName: "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy", Options: map[string]any{"SystemdCgroup": true}},
	}
	cand, err := nvidiatoml.Rebuild(op, nvidiatoml.Layout{Version: 2}, rts, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if string(cand) == string(op) {
		t.Fatal("test needs a rebuild that differs in text from the operator's file")
	}
	nv := nvidiatoml.IsManaged([]string{"nvidia", "nvidia-cdi", "nvidia-legacy"})
	if !sameButZeros(op, cand, nv) {
		t.Fatalf("operator file and rebuild should be the same by meaning:\n%s", cand)
	}
	changed := strings.Replace(string(op), "nvidia-container-runtime.cdi", "nvidia-container-runtime.CDI", 1)
	if sameButZeros([]byte(changed), cand, nv) {
		t.Fatal("a different BinaryName must not count as the same")
	}
	noCgroup := strings.Replace(string(op), "SystemdCgroup = true", "SystemdCgroup = false", 1)
	if sameButZeros([]byte(noCgroup), cand, nv) {
		t.Fatal("SystemdCgroup false vs true must not count as the same")
	}
	// Zeros outside nvidia runtimes are meaning: not dropped.
	withRuncZero := strings.Replace(string(op), "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n", "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n          runtime_root = \"\"\n", 1)
	if withRuncZero == string(op) {
		t.Fatal("anchor for runc not found")
	}
	if sameButZeros([]byte(withRuncZero), cand, nv) {
		t.Fatal("a zero value outside the nvidia runtimes must count")
	}
}
