#!/bin/sh
# gotool.sh — sourced by lab/crictl/build.sh and lab/nvidia-ctk/build.sh: what building a pinned Go
# tool into one output has in common. Not run on its own.
#
# gotool_prepare DIR PKG OUT sets `version` (PKG's version in DIR/go.mod, where the tool's module
# pins it with a `tool` directive) and `out` (OUT made absolute), takes the output's lock (several
# test binaries may ask for the same output at once: one builds, the others wait and find it up to
# date), and exits 0 when the output is newer than go.mod, so the caller only builds when needed. The
# caller builds to "$out.tmp" and renames it last, so an interrupted build never leaves a partial
# binary that this check would take for a finished one.

gotool_prepare() {
	if [ $# -ne 3 ]; then
		echo "usage: build.sh OUT" >&2
		exit 2
	fi
	version=$(awk -v m="$2" '($1 == m) || ($1 == "require" && $2 == m) { print ($1 == m) ? $2 : $3 }' "$1/go.mod")
	if [ -z "$version" ]; then
		echo "build.sh: cannot find the $2 version in $1/go.mod" >&2
		exit 1
	fi
	case $3 in
	/*) out=$3 ;;
	*) out=$(pwd)/$3 ;;
	esac
	mkdir -p "$(dirname "$out")"
	exec 9>"$out.lock"
	flock 9
	# shellcheck disable=SC3013 # -nt: every sh the lab runs on (dash, bash, busybox) has it
	if [ -e "$out" ] && [ "$out" -nt "$1/go.mod" ]; then
		echo "build.sh: $out is up to date" >&2
		exit 0
	fi
}
