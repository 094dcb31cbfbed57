#!/bin/sh
# build.sh OUT — build NVIDIA's nvidia-ctk (the NVIDIA Container Toolkit CLI)
# from the version this nested module pins, so tests run the real
# `nvidia-ctk runtime configure` against lab nodes.
#
# The module has no code of its own: go.mod names the command with a `tool`
# directive, which pins the toolkit and its whole dependency graph in go.sum
# (reproducible, fetched through the module proxy, and offline once the module
# cache has it). `go install ...@version` would pin the same graph but check
# it against the checksum database on every fresh cache.
#
# Cached like lab/build-containerd.sh: a target newer than go.mod is kept, and
# concurrent builds of one output are serialised with flock. Unlike
# containerd, nvidia-ctk needs cgo (go-nvml dlopens libnvidia-ml); the linker
# flags are upstream's (Makefile EXTLDFLAGS), which leave NVML's symbols to be
# resolved at run time, so the binary builds and runs on a machine without a
# GPU driver. The version is stamped as upstream's Makefile does, so
# `nvidia-ctk --version` says which release it is.
set -eu

if [ $# -ne 1 ]; then
	echo "usage: $0 OUT" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
pkg=github.com/NVIDIA/nvidia-container-toolkit
# shellcheck source=lab/gotool.sh
. "$here/../gotool.sh"
gotool_prepare "$here" "$pkg" "$1"
# -buildvcs=false: the enclosing git repo is nodeconverge's, whose revision
# says nothing about this build.
(cd "$here" && CGO_ENABLED=1 nice -n 10 go build -mod=readonly -buildvcs=false -trimpath \
	-ldflags "-s -w '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files -Wl,-z,lazy' -X $pkg/internal/info.version=${version#v}" \
	-o "$out.tmp" "$pkg/cmd/nvidia-ctk")
# Rename last so an interrupted build never leaves a partial binary that the
# cache check above would take for a finished one.
mv -f "$out.tmp" "$out"
