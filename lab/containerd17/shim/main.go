// Command shim is containerd 1.7's runc shim (containerd-shim-runc-v2), built
// from the same module as lab/containerd17's daemon, so lab nodes that run
// the 1.7 build start pod sandboxes with their own generation's shim (the
// 1.6 shim Debian ships refuses a 1.7 daemon's start: "bootstrap parameters
// do not match command-line arguments"). The body mirrors upstream's
// cmd/containerd-shim-runc-v2/main.go.
package main

import (
	"context"

	"github.com/containerd/containerd/runtime/v2/runc/manager"
	_ "github.com/containerd/containerd/runtime/v2/runc/pause"
	_ "github.com/containerd/containerd/runtime/v2/runc/task/plugin"
	"github.com/containerd/containerd/runtime/v2/shim"
)

func main() {
	shim.RunManager(context.Background(), manager.NewShimManager("io.containerd.runc.v2"))
}
