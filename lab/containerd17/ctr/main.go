// Command ctr is containerd 1.7's ctr client built from the same module
// version as ../main.go. The lab's stand-in systemctl and the health gates
// run `ctr version` and `ctr plugins ls` against the node's daemon; Debian's
// ctr 1.6 speaks to the 1.7 daemon too, so this is built only on request
// (build.sh's second argument), to rule the client out when a gate fails.
// It mirrors upstream's cmd/ctr/main.go.
package main

import (
	"fmt"
	"os"

	"github.com/containerd/containerd/cmd/ctr/app"
	"github.com/containerd/containerd/pkg/seed" //nolint:staticcheck // upstream seeds math/rand for its dependencies
)

func init() {
	seed.WithTimeAndRand() //nolint:staticcheck // as upstream
}

func main() {
	if err := app.New().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "ctr: %s\n", err)
		os.Exit(1)
	}
}
