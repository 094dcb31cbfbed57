// Command ctr is containerd 2.x's ctr client built from the same module
// version as ../main.go, so `ctr plugins ls` talks to the 2.x daemon with a
// matching API. It mirrors upstream's cmd/ctr/main.go.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/cmd/ctr/app"
)

func main() {
	if err := app.New().Run(context.Background(), os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ctr:", err)
		os.Exit(1)
	}
}
