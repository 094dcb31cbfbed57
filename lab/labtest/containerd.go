package labtest

import (
	"fmt"
	"os/exec"
	"sync"
	"testing"
)

// Generation names a containerd release line the lab can run. Tests ask for a generation, never for a
// path: where its binary comes from (a Debian package, a build from its Go module) is decided here once.
type Generation string

// The generations the tests run against.
const (
	// Containerd16 is Debian 12's containerd package (1.6.x), installed by lab/deps.sh.
	Containerd16 Generation = "1.6"
	// Containerd17 is containerd 1.7 (Ubuntu 24.04's release line) built from its Go module in
	// lab/containerd17.
	Containerd17 Generation = "1.7"
	// Containerd2 is containerd 2.x built from its Go module in lab/containerd2.
	Containerd2 Generation = "2.x"
)

// builtGeneration is a containerd generation built from a nested Go module of the lab.
type builtGeneration struct {
	env string // environment variable that names an already built binary (make test sets it)
	dir string // lab/<dir>/build.sh builds it
	out string // bin/<out> below the repository: the same place `make` builds it
}

var built = map[Generation]builtGeneration{
	Containerd17: {env: "NODECONVERGE_CONTAINERD17", dir: "containerd17", out: "containerd17"},
	Containerd2:  {env: "NODECONVERGE_CONTAINERD2", dir: "containerd2", out: "containerd2"},
}

var (
	binMu    sync.Mutex
	binCache = map[Generation]binResult{}
)

type binResult struct {
	path string
	err  error
}

// Containerd returns the containerd binary of generation g, failing the test when it cannot be had.
//
// For a built generation, the binary named by its environment variable (`make test` builds it and sets
// the variable) is used when set; otherwise the generation's build.sh builds it into the repository's
// bin/, the same output `make` uses, so `go test ./...` run by hand works too and never reads a
// leftover from some other run: build.sh rebuilds whenever its go.mod is newer than the binary, and
// serialises concurrent builds of one output with a lock. The result is kept for the test binary's life.
func Containerd(t testing.TB, g Generation) string {
	t.Helper()
	binMu.Lock()
	r, ok := binCache[g]
	if !ok {
		r.path, r.err = containerdBin(g)
		binCache[g] = r
	}
	binMu.Unlock()
	if r.err != nil {
		t.Fatalf("labtest: containerd %s: %v", g, r.err)
	}
	return r.path
}

func containerdBin(g Generation) (string, error) {
	if g == Containerd16 {
		p, err := exec.LookPath("containerd")
		if err != nil {
			return "", fmt.Errorf("Debian's containerd package is not installed (lab/deps.sh installs it): %w", err)
		}
		return p, nil
	}
	b, ok := built[g]
	if !ok {
		return "", fmt.Errorf("unknown generation %q", g)
	}
	return envOrBuild(b.env, b.dir, b.out)
}
