#!/bin/sh
# build-containerd.sh MODULE_DIR OUT [CTR_OUT] — build containerd, its runc
# shim (OUT-shim-runc-v2) and optionally its ctr from one of the lab's nested modules: lab/containerd2
# (github.com/containerd/containerd/v2) or lab/containerd17
# (github.com/containerd/containerd v1.7.x). Each module's build.sh calls this
# with its own directory, so every generation is built, cached and locked the
# same way.
#
# The build is cached: a target that exists and is newer than go.mod is kept,
# because go.mod pins the containerd version and a rebuild costs minutes on a
# 2-core machine. CGO_ENABLED=0 gives a static binary that does not depend on
# the host's libc; it drops only the cgo-only btrfs snapshotter, which the lab
# does not use. -trimpath keeps local paths out of the binary; the version is
# stamped so `containerd --version` says which release it is. The build runs
# at a lower priority (nice): the machine is shared with the tests it serves.
set -eu

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: $0 MODULE_DIR OUT [CTR_OUT]" >&2
	exit 2
fi

here=$(cd "$1" && pwd)
shift
# The containerd module the nested module requires: its path names the
# package whose Version variable the linker stamps.
modpath=$(awk '$1 == "require" && $2 ~ /^github\.com\/containerd\/containerd(\/v2)?$/ { print $2 }' "$here/go.mod")
version=$(awk '$1 == "require" && $2 ~ /^github\.com\/containerd\/containerd(\/v2)?$/ { print $3 }' "$here/go.mod")
if [ -z "$version" ] || [ -z "$modpath" ]; then
	echo "$0: cannot find the containerd version in $here/go.mod" >&2
	exit 1
fi

# abs turns a possibly relative path into an absolute one, because go build
# runs from the module's directory, not the caller's.
abs() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s/%s\n' "$(pwd)" "$1" ;;
	esac
}

build() { # build OUT PKG
	out=$(abs "$1")
	mkdir -p "$(dirname "$out")"
	# Several test binaries may ask for the same output at once (go test runs
	# packages in parallel): one builds, the others wait and find it up to date.
	exec 9>"$out.lock"
	flock 9
	# shellcheck disable=SC3013 # -nt: every sh the lab runs on (dash, bash, busybox) has it
	if [ -e "$out" ] && [ "$out" -nt "$here/go.mod" ]; then
		echo "$0: $out is up to date" >&2
		exec 9>&-
		return 0
	fi
	# -buildvcs=false: the enclosing git repo is nodeconverge's, whose
	# revision says nothing about this containerd build.
	(cd "$here" && CGO_ENABLED=0 nice -n 10 go build -mod=readonly -buildvcs=false -trimpath \
		-tags urfave_cli_no_docs \
		-ldflags "-X $modpath/version.Version=$version" \
		-o "$out.tmp" "$2")
	# Rename last so an interrupted build never leaves a partial binary that
	# the cache check above would take for a finished one.
	mv -f "$out.tmp" "$out"
	exec 9>&-
}

build "$1" .
# The generation's own runc shim beside it (OUT-shim-runc-v2): a daemon of
# another generation than Debian's 1.6 cannot start sandboxes with the 1.6
# shim, and the lab's systemctl stand-in puts this one first on the
# daemon's PATH.
if [ -d "$here/shim" ]; then
	build "$1-shim-runc-v2" ./shim
fi
if [ $# -eq 2 ]; then
	build "$2" ./ctr
fi
