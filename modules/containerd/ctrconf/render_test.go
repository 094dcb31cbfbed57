package ctrconf

import (
	"strings"
	"testing"

	"nodeconverge/engine/module"
)

// Issue 10, defect 10: changes read as TOML (no JSON-escaped quotes),
// grouped under their table, zero-valued fields of a new table counted,
// imports never shown.
func TestDescribeChanges(t *testing.T) {
	rt := `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia`
	cs := []module.EffectiveChange{
		{Key: "imports", Before: `["/a"]`, After: `["/a", "/b"]`},
		{Key: rt + ".runtime_type", After: `"io.containerd.runc.v2"`},
		{Key: rt + ".options.BinaryName", After: `"/usr/bin/nvidia-container-runtime"`},
		{Key: `plugins."io.containerd.grpc.v1.cri".sandbox_image`, Before: `"a:1"`, After: `"b:2"`},
	}
	for _, f := range []string{"runtime_engine", "runtime_root", "privileged_without_host_devices", "pod_annotations", "cni_conf_dir", "cni_max_conf_num", "base_runtime_spec"} {
		v := `""`
		if f == "privileged_without_host_devices" {
			v = "false"
		}
		cs = append(cs, module.EffectiveChange{Key: rt + "." + f, After: v})
	}
	got := DescribeChanges(cs, "")
	for _, want := range []string{
		"[" + rt + "]\n    runtime_type = \"io.containerd.runc.v2\"",
		"[" + rt + ".options]\n    BinaryName = \"/usr/bin/nvidia-container-runtime\"",
		`sandbox_image = "a:1"  ->  "b:2"`,
		"# and 7 more keys at their zero value",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, bad := range []string{`\"`, "imports", "runtime_root"} {
		if strings.Contains(got, bad) {
			t.Errorf("%q shown in:\n%s", bad, got)
		}
	}
}
