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

// TestVersion1File (issue 10 matrix, nvidia-toolkit-test-config-v1 on 1.6
// and 1.7, refused before): an unversioned config that names the CRI plugin
// `cri`. Runtimes rendered under io.containerd.grpc.v1.cri collided with
// the file's own `cri` table, which containerd migrates to that id, and were
// never effective; rendered under `cri` they are, on 1.x and 2.x alike.
func TestVersion1File(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "e2e", "testdata", "corpus", "nvidia-toolkit-test-config-v1", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []labtest.Generation{labtest.Containerd16, labtest.Containerd2} {
		t.Run(string(g), func(t *testing.T) {
			bin := labtest.Containerd(t, g)
			dir := t.TempDir()
			tk := toolkitDir(t, dir)
			main := filepath.Join(dir, "config.toml")
			if err := os.WriteFile(main, src, 0o644); err != nil {
				t.Fatal(err)
			}
			plan, err := checkAuto(t, main, tk, "present", bin)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if len(plan.Files) != 1 || !strings.Contains(string(plan.Files[0].After), "[plugins.cri.containerd.runtimes.nvidia]") {
				t.Fatalf("plan: %+v", plan.Files)
			}
			if err := os.WriteFile(main, plan.Files[0].After, 0o644); err != nil {
				t.Fatal(err)
			}
			dump, err := runDump(bin, main)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(dump, filepath.Join(tk, "nvidia-container-runtime.cdi")) {
				t.Errorf("dump lacks nvidia-cdi:\n%s", dump)
			}
			if again, err := checkAuto(t, main, tk, "present", bin); err != nil || len(again.Files) > 0 {
				t.Errorf("rerun: %v %+v", err, again)
			}
		})
	}
}
