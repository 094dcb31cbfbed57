#!/bin/sh
# build.sh OUT — build crictl, the CRI command-line client of
# sigs.k8s.io/cri-tools, from the version this nested module pins, so the
# lab's nodes can carry the real crictl that nodeconverge's health gate falls
# back on when it cannot forward the containerd socket over SSH.
#
# Like lab/nvidia-ctk: the module has no code of its own; go.mod names the
# command with a `tool` directive, which pins cri-tools and its whole
# dependency graph in go.sum (fetched through the module proxy, offline once
# the module cache has it). Static (CGO_ENABLED=0), version-stamped as
# upstream's Makefile does, cached while newer than go.mod, and serialised
# with flock so parallel test binaries build once (about 4 minutes on 2
# cores the first time).
set -eu

if [ $# -ne 1 ]; then
	echo "usage: $0 OUT" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
pkg=sigs.k8s.io/cri-tools
# shellcheck source=lab/gotool.sh
. "$here/../gotool.sh"
gotool_prepare "$here" "$pkg" "$1"
# -buildvcs=false: the enclosing git repo is nodeconverge's.
(cd "$here" && CGO_ENABLED=0 nice -n 10 go build -mod=readonly -buildvcs=false -trimpath \
	-ldflags "-s -w -X $pkg/pkg/version.Version=$version" \
	-o "$out.tmp" "$pkg/cmd/crictl")
mv -f "$out.tmp" "$out"
