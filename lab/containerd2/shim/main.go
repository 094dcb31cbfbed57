// Command shim is containerd 2.x's runc shim (containerd-shim-runc-v2), built
// from the same module as lab/containerd2's daemon: a 2.x daemon cannot use
// Debian's 1.6 shim (it fails "start failed: io.containerd.runc.v2: type
// with url ... not found"), so lab nodes that run the 2.x build get this
// shim first on their PATH and start real pod sandboxes with it. The body
// mirrors upstream's cmd/containerd-shim-runc-v2/main.go.
package main

import (
	"context"

	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task/plugin"
	"github.com/containerd/containerd/v2/pkg/shim"
)

func main() {
	shim.RunShim(context.Background(), manager.NewShimManager("io.containerd.runc.v2"))
}
