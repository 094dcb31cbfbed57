package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// goTool is a real tool the tests need, built from the Go module its lab/<name> folder pins.
//
// Like Containerd: the binary named by env is used when set (`make test` builds it and sets the
// variable); otherwise lab/<name>/build.sh builds it into the repository's bin/ (the output `make`
// uses), rebuilding whenever its go.mod is newer, so a run by hand never picks up a leftover of
// another version. The result is kept for the test binary's life.
type goTool struct {
	env  string // the variable that names an already built binary
	name string // lab/<name>/build.sh builds bin/<name>

	once sync.Once
	res  binResult
}

// path returns the tool's binary, failing the test when it cannot be had.
func (g *goTool) path(t testing.TB) string {
	t.Helper()
	g.once.Do(func() { g.res.path, g.res.err = g.build() })
	if g.res.err != nil {
		t.Fatalf("labtest: %s: %v", g.name, g.res.err)
	}
	return g.res.path
}

func (g *goTool) build() (string, error) { return envOrBuild(g.env, g.name, g.name) }

// envOrBuild is a lab binary: the one the environment variable env names
// (the lead's prebuilt ones), else bin/NAME built by lab/DIR/build.sh.
func envOrBuild(env, dir, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	out := filepath.Join(RepoRoot(), "bin", name)
	script := filepath.Join(RepoRoot(), "lab", dir, "build.sh")
	if msg, err := exec.Command(script, out).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", script, out, err, msg)
	}
	return out, nil
}
