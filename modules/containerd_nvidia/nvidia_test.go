package containerdnvidia

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"
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

// TestChoosePath (issue 10, defect 5): where path auto puts the runtimes,
// from the ownership the tree shows.
func TestChoosePath(t *testing.T) {
	const cri = "io.containerd.grpc.v1.cri"
	v1, v2 := "containerd github.com/containerd/containerd 1.6.20", "containerd github.com/containerd/containerd/v2 v2.4.2"
	main := ctrconf.File{Path: "/etc/containerd/config.toml", Plugins: []string{cri}}
	glob := []string{"/etc/containerd/conf.d/*.toml"}
	other := ctrconf.File{Path: "/etc/containerd/conf.d/10-other.toml", Plugins: []string{"io.containerd.internal.v1.opt"}}
	opDropin := ctrconf.File{Path: "/etc/containerd/conf.d/99-nvidia.toml", Plugins: []string{cri},
		Content: []byte("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n")}
	gpu := ctrconf.File{Path: "/etc/containerd/conf.d/50-gpu.toml",
		Content: []byte("[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia-cdi]\n")}
	managed := nvidiatoml.IsManaged([]string{"nvidia", "nvidia-cdi", "nvidia-legacy"})
	for _, c := range []struct {
		name string
		tree ctrconf.Tree
		want string
	}{
		{"1.x main owns the CRI plugin", ctrconf.Tree{BinVersion: v1, Files: []ctrconf.File{main, other}, Imports: glob}, main.Path},
		{"1.x the operator's drop-in owns it", ctrconf.Tree{BinVersion: v1, Files: []ctrconf.File{main, opDropin}, Imports: glob}, opDropin.Path},
		{"1.x nobody owns it, the drop-in is loaded", ctrconf.Tree{BinVersion: v1, Files: []ctrconf.File{{Path: main.Path}}, Imports: glob}, opDropin.Path},
		{"2.x a drop-in an import loads", ctrconf.Tree{BinVersion: v2, Files: []ctrconf.File{main, other}, Imports: glob}, opDropin.Path},
		{"2.x the drop-in that holds them", ctrconf.Tree{BinVersion: v2, Files: []ctrconf.File{main, gpu, other}, Imports: glob}, gpu.Path},
		{"2.x no imports", ctrconf.Tree{BinVersion: v2, Files: []ctrconf.File{main}}, main.Path},
	} {
		c.tree.Main = main.Path
		if got, why := choosePath(&c.tree, BinMajor(c.tree.BinVersion), managed); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, why, c.want)
		}
	}
}

// TestRuncTemplateSpelling (issue 10, defect 2): runc's options spelled
// binaryName/systemdCgroup give the nvidia runtimes SystemdCgroup and no
// second spelling of BinaryName, on both generations.
func TestRuncTemplateSpelling(t *testing.T) {
	for major, plugin := range map[int]string{1: "io.containerd.grpc.v1.cri", 2: "io.containerd.cri.v1.runtime"} {
		e := &ctrconf.Effective{OK: true, Values: map[string]any{"plugins": map[string]any{plugin: map[string]any{"containerd": map[string]any{"runtimes": map[string]any{
			"runc": map[string]any{"runtime_type": "io.containerd.runc.v2", "options": map[string]any{"binaryName": "/usr/local/bin/runc", "systemdCgroup": true}},
		}}}}}}
		rtype, opts := runcTemplate(e, major)
		if rtype != "io.containerd.runc.v2" || len(opts) != 1 || opts["SystemdCgroup"] != true {
			t.Errorf("major %d: %s %v, want SystemdCgroup = true only", major, rtype, opts)
		}
	}
}
