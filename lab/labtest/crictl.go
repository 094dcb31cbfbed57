package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// crictlEnv names an already built crictl (`make test` builds it and sets the variable).
const crictlEnv = "NODECONVERGE_CRICTL"

var (
	crictlOnce sync.Once
	crictlRes  binResult
)

// Crictl returns the path of the real crictl (sigs.k8s.io/cri-tools, built from the version
// lab/crictl pins), failing the test when it cannot be had. A test that wants a node to have crictl
// installs it there with InstallCrictl; nodes have none by default, as many real nodes do not.
//
// Like NvidiaCTK: NODECONVERGE_CRICTL is used when set; otherwise lab/crictl/build.sh builds it into
// the repository's bin/, rebuilding whenever its go.mod is newer. Kept for the test binary's life.
func Crictl(t testing.TB) string {
	t.Helper()
	crictlOnce.Do(func() { crictlRes.path, crictlRes.err = crictlBin() })
	if crictlRes.err != nil {
		t.Fatalf("labtest: crictl: %v", crictlRes.err)
	}
	return crictlRes.path
}

func crictlBin() (string, error) {
	if p := os.Getenv(crictlEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", crictlEnv, p, err)
		}
		return p, nil
	}
	out := filepath.Join(RepoRoot(), "bin", "crictl")
	script := filepath.Join(RepoRoot(), "lab", "crictl", "build.sh")
	if msg, err := exec.Command(script, out).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", script, out, err, msg)
	}
	return out, nil
}

// InstallCrictl puts crictl on the node's PATH (/usr/local/sbin/crictl, a link to the host's
// binary: the node shares the host's files outside its own bind mounts).
func (l *Lab) InstallCrictl(t testing.TB, node string) {
	t.Helper()
	bin := Crictl(t)
	dst := l.NodePath(node, "/usr/local/sbin/crictl")
	if err := os.Symlink(bin, dst); err != nil && !os.IsExist(err) {
		t.Fatalf("labtest: install crictl on %s: %v", node, err)
	}
}
