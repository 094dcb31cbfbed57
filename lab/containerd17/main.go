// Command containerd17 is containerd 1.7 (Ubuntu 24.04's release line) built
// from its Go module, so the lab and the tests can check nodeconverge's
// config handling against the 1.7 daemon next to Debian's 1.6 package and
// the 2.x build in ../containerd2. 1.7 reads config version 2 like 1.6 (per
// plugin whole replacement of imported files) but also takes version 3 files
// only from 2.0 on; that difference is what the corpus matrix measures.
//
// It lives in its own nested module (nodeconverge/lab/containerd17) so that
// `go test ./...` in the main module never compiles containerd's dependency
// tree. The body mirrors upstream's cmd/containerd/main.go at v1.7; the
// builtins import registers every built-in plugin, the CRI one included
// (cmd/containerd/builtins/cri.go, build tag !no_cri).
package main

import (
	"fmt"
	"os"

	"github.com/containerd/containerd/cmd/containerd/command"
	"github.com/containerd/containerd/pkg/seed" //nolint:staticcheck // upstream seeds math/rand for its dependencies

	// Registers the built-in plugins (snapshotters, runtime, CRI, ...).
	_ "github.com/containerd/containerd/cmd/containerd/builtins"
)

func init() {
	// Upstream's main does this: some dependencies still draw from the
	// global math/rand source and expect it seeded.
	seed.WithTimeAndRand() //nolint:staticcheck // as upstream
}

func main() {
	if err := command.App().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "containerd: %s\n", err)
		os.Exit(1)
	}
}
