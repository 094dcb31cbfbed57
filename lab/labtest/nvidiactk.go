package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// nvidiaCTKEnv names an already built nvidia-ctk (`make test` builds it and sets the variable).
const nvidiaCTKEnv = "NODECONVERGE_NVIDIA_CTK"

var (
	ctkOnce sync.Once
	ctkRes  binResult
)

// NvidiaCTK returns the path of NVIDIA's real nvidia-ctk (the NVIDIA Container Toolkit CLI, built
// from the version lab/nvidia-ctk pins), failing the test when it cannot be had. Tests run it inside a
// node (Lab.Exec) to see what `nvidia-ctk runtime configure` does to that node's containerd config;
// the node shares the host's binaries, so the host path works there.
//
// Like Containerd: the binary named by NODECONVERGE_NVIDIA_CTK is used when set; otherwise
// lab/nvidia-ctk/build.sh builds it into the repository's bin/ (the output `make` uses), rebuilding
// whenever its go.mod is newer, so a run by hand never picks up a leftover of another version. The
// result is kept for the test binary's life.
func NvidiaCTK(t testing.TB) string {
	t.Helper()
	ctkOnce.Do(func() { ctkRes.path, ctkRes.err = nvidiaCTKBin() })
	if ctkRes.err != nil {
		t.Fatalf("labtest: nvidia-ctk: %v", ctkRes.err)
	}
	return ctkRes.path
}

func nvidiaCTKBin() (string, error) {
	if p := os.Getenv(nvidiaCTKEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", nvidiaCTKEnv, p, err)
		}
		return p, nil
	}
	out := filepath.Join(RepoRoot(), "bin", "nvidia-ctk")
	script := filepath.Join(RepoRoot(), "lab", "nvidia-ctk", "build.sh")
	if msg, err := exec.Command(script, out).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", script, out, err, msg)
	}
	return out, nil
}
