package containerdnvidia

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

// TestV3ConversionCarriesValues (issue 28 #2): containerd 2.x's own
// defaults (corpus containerd-2.x-default, version 4) importing conf.d, and
// the incident's version 2 drop-in with a stale nvidia BinaryName, so the
// runtimes must be rebuilt. The drop-in is converted to its main config's
// version 3 layout, and every other value it sets moves with it to the
// name 2.x's migration gives it: the pinned sandbox image, config_path and
// runc stay effective, nothing else changes, and a second check plans
// nothing.
func TestV3ConversionCarriesValues(t *testing.T) {
	bin := labtest.Containerd(t, labtest.Containerd2)
	dir, main, tk := corpusNode(t, "containerd-2.x-default")
	// The default config (version 4 in 2.2+) imports conf.d itself.
	confd := filepath.Join(dir, "conf.d")
	inc, err := os.ReadFile(filepath.Join("..", "..", "lab", "scenarios", "incident", "99-nvidia.toml"))
	if err != nil {
		t.Fatal(err)
	}
	op := strings.ReplaceAll(string(inc), "/usr/local/nvidia/toolkit", tk)
	op = strings.Replace(op, tk+"/nvidia-container-runtime\"", "/opt/old/nvidia-container-runtime\"", 1)
	dropin := filepath.Join(confd, "99-nvidia.toml")
	if err := os.WriteFile(dropin, []byte(op), 0o644); err != nil {
		t.Fatal(err)
	}
	before := effective(t, main, bin)
	a := Module{}.NewArgs().(*Args)
	a.Path, a.Config, a.ToolkitDir, a.State, a.Containerd = dropin, main, tk, "present", bin
	p, err := checkArgs(t, dir, a)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if len(p.Files) != 1 || p.Files[0].Path != dropin {
		t.Fatalf("plan %+v", p.Files)
	}
	got := string(p.Files[0].After)
	for _, want := range []string{"version = 3", `"io.containerd.cri.v1.images"`, "pause:3.9", "config_path", `"io.containerd.cri.v1.runtime"`} {
		if !strings.Contains(got, want) {
			t.Errorf("the converted drop-in lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, `plugins."io.containerd.grpc.v1.cri".containerd`) || strings.Contains(got, `plugins."io.containerd.grpc.v1.cri".registry`) {
		t.Errorf("version 2 tables left in the version 3 file:\n%s", got)
	}
	if err := os.WriteFile(dropin, p.Files[0].After, 0o644); err != nil {
		t.Fatal(err)
	}
	after := effective(t, main, bin)
	for _, k := range []string{`plugins."io.containerd.cri.v1.images".pinned_images.sandbox`, `plugins."io.containerd.cri.v1.images".registry.config_path`,
		`plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options.SystemdCgroup`} {
		if before[k] != after[k] || after[k] == "" {
			t.Errorf("%s: %q -> %q", k, before[k], after[k])
		}
	}
	if again, err := checkArgs(t, dir, a); err != nil || again.Changed() {
		t.Fatalf("second check: %v %+v", err, again)
	}
}
