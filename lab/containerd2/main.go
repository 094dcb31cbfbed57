// Command containerd2 is containerd 2.x built from its Go module, so the lab
// and the tests can check nodeconverge's config handling against the real
// 2.x merge rules (config version 3, deep-merged imports) next to Debian's
// 1.6 binary (version 2, per-plugin whole replacement).
//
// It lives in its own nested module (nodeconverge/lab/containerd2) so that
// `go test ./...` in the main module never compiles containerd's large
// dependency tree. The body mirrors upstream's cmd/containerd/main.go; the
// builtins import registers every built-in plugin, the CRI ones included
// (cmd/containerd/builtins/cri.go, build tag !no_cri).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/cmd/containerd/command"

	// Registers the built-in plugins (snapshotters, runtime, CRI, ...).
	_ "github.com/containerd/containerd/v2/cmd/containerd/builtins"
)

func main() {
	if err := command.App().Run(context.Background(), os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "containerd:", err)
		os.Exit(1)
	}
}
