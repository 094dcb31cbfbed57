// Command pause is the program of the lab's sandbox image, a STAND-IN for
// registry.k8s.io/pause: the lab has no registry, so lab/build-standins.sh
// builds this static binary into an OCI image and lab.sh imports it on every
// node under the sandbox image names containerd is configured with. Like the
// real pause it holds the sandbox open until it is told to stop: it waits
// for SIGTERM or SIGINT and exits 0.
//
// `pause -echo WORDS...` prints WORDS and exits instead: the lab's workload
// proof runs it as a container to judge its output (the real image has no
// such mode; a GPU node would run nvidia-smi -L from a CUDA image).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-echo" {
		fmt.Println(strings.Join(os.Args[2:], " "))
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
