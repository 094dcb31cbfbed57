#!/bin/sh
# build-standins.sh [OUT_DIR] — build the lab's sandbox stand-ins (lab/standins) into OUT_DIR
# (default: the repository's bin/), cached and locked like the containerd builds:
#   lab-runc            the runc STAND-IN every node's /usr/local/sbin/runc runs (lab/standins/labrunc)
#   lab-pause           the sandbox image's program, static (lab/standins/pause)
#   lab-sandbox-image.tar  an OCI archive of lab-pause under every sandbox image name in SANDBOX_IMAGES,
#                       which lab.sh imports on each node with `ctr images import` (no registry here)
# An output is rebuilt when any file under lab/standins is newer than it. Prints nothing when all is
# up to date, so lab.sh can call it on every `up`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${1:-$repo/bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The sandbox images containerd generations and common configs name by default: 1.6 (3.6), 1.7
# (3.8), 2.x (3.10, 3.10.2 since 2.2), kubeadm and the incident's config (3.9). A config naming another image gets a
# clear "sandbox image ... is not on the node" from the proof, which is the point of the test.
SANDBOX_IMAGES="registry.k8s.io/pause:3.6 registry.k8s.io/pause:3.8 registry.k8s.io/pause:3.9 registry.k8s.io/pause:3.10 registry.k8s.io/pause:3.10.1 registry.k8s.io/pause:3.10.2"

exec 9>"$out/standins.lock"
flock 9
# stale FILE: FILE is missing or older than some source of the stand-ins (or this script).
stale() {
	[ -e "$1" ] || return 0
	[ -n "$(find "$here/standins" "$here/build-standins.sh" -newer "$1" -print -quit)" ]
}
build() { # build OUT PKG [static]
	if stale "$out/$1"; then
		(cd "$repo" && CGO_ENABLED=0 nice -n 10 go build -trimpath -buildvcs=false -ldflags=-s -o "$out/$1.tmp" "./lab/standins/$2")
		mv -f "$out/$1.tmp" "$out/$1"
	fi
}
build lab-runc labrunc
build lab-pause pause
# shellcheck disable=SC3013 # -nt: every sh the lab runs on (dash, bash, busybox) has it
if stale "$out/lab-sandbox-image.tar" || [ "$out/lab-pause" -nt "$out/lab-sandbox-image.tar" ]; then
	tmpbin=$(mktemp -d)
	trap 'rm -rf "$tmpbin"' EXIT
	(cd "$repo" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$tmpbin/ociimage" ./lab/standins/ociimage)
	# shellcheck disable=SC2086
	"$tmpbin/ociimage" -bin "$out/lab-pause" -out "$out/lab-sandbox-image.tar" $SANDBOX_IMAGES
fi
