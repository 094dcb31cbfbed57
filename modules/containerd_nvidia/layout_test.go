package containerdnvidia

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

// aksV2Named is AKS's config.toml for containerd 2.x (corpus
// aks-gpu-containerd2): `version = 2` with the 2.x plugin names.
const aksV2Named = `version = 2
oom_score = -999
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "mcr.microsoft.com/oss/kubernetes/pause:3.6"
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "nvidia-container-runtime"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia-container-runtime]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia-container-runtime.options]
    BinaryName = "/usr/bin/nvidia-container-runtime"
    SystemdCgroup = true
`

// TestVersion2FileWith2xNames (issue 10 matrix, aks-gpu-containerd2 alone on
// 2.x): a version 2 file that already holds its runtimes under
// io.containerd.cri.v1.runtime. containerd 2.x's migration skips a version 2
// CRI table's runtimes when that table exists, so runtimes written in the
// version 2 layout never take effect (refused before); written under the
// names the file uses, with its version key untouched, they do, and the
// file's own runtime stays.
func TestVersion2FileWith2xNames(t *testing.T) {
	bin := labtest.Containerd(t, labtest.Containerd2)
	dir := t.TempDir()
	tk := toolkitDir(t, dir)
	main := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(main, []byte(aksV2Named), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := checkAuto(t, main, tk, "present", bin)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(plan.Files) != 1 || plan.Files[0].Path != main {
		t.Fatalf("plan writes %+v, want %s only", plan.Files, main)
	}
	cand := string(plan.Files[0].After)
	if !strings.HasPrefix(cand, "version = 2\n") {
		t.Errorf("candidate changed the version key:\n%s", cand)
	}
	if err := os.WriteFile(main, plan.Files[0].After, 0o644); err != nil {
		t.Fatal(err)
	}
	dump, err := runDump(bin, main)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"runtimes.nvidia-container-runtime]",
		"runtimes.nvidia]", "runtimes.nvidia-cdi]", "runtimes.nvidia-legacy]",
		"BinaryName = '" + filepath.Join(tk, "nvidia-container-runtime") + "'",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("dump after the write lacks %s", want)
		}
	}
}
