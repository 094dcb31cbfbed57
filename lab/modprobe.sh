#!/bin/sh
# shellcheck disable=SC2016 # the awk programs are single-quoted on purpose: awk expands them
# modprobe STAND-IN for the nodeconverge local lab.
#
# The lab nodes share the host's kernel, and loading a module there would load it for the machine, so
# this script plays the part of kmod's `modprobe` on a per-node list of modules. It keeps real state
# and answers the way modprobe does:
#   /lib/modules/$(uname -r)/modules.dep      the node's available modules and their dependencies
#                                             (real format; lab.sh writes a GPU node's usual set)
#   /lib/modules/$(uname -r)/modules.builtin  the node's built-in modules
#   $NODE/proc/modules                        the node's loaded modules, one line each in the kernel's
#                                             /proc/modules format ("name size refcount users, Live 0x0");
#                                             bind-mounted over /proc/modules where the kernel has one,
#                                             printed by the lsmod stand-in, and read at /proc/modules by
#                                             the node's Python through the usercustomize stand-in where
#                                             the kernel has none (this machine's)
#   $NODE/modules/NAME.params                 the parameters a load passed (options lines of
#                                             /etc/modprobe.d/*.conf first, then the command line), as the
#                                             kernel would show them under /sys/module/NAME/parameters
# Load: dependencies first, each counted as used; a name with - or _ is the same module. `-n` (dry run)
# resolves and prints nothing. `--first-time` fails on a module already in (or built into) the kernel.
# `-r` removes the module and then each dependency no longer used; a built-in or used module, or one
# not loaded, fails as modprobe fails. Not modelled: aliases, install/remove commands, blacklist.
# lab.sh installs this file as /usr/local/sbin/modprobe inside each node with @NODE@ replaced by the
# node's directory on the host.
set -u

NODE=@NODE@
MODDIR=/lib/modules/$(uname -r)
PROC=$NODE/proc/modules

dry=0 remove=0 first=0 quiet=0 all=0
while [ $# -gt 0 ]; do
	case $1 in
	-n | --dry-run | --show) dry=1 ;;
	-r | --remove) remove=1 ;;
	--first-time) first=1 ;;
	-q | --quiet) quiet=1 ;;
	-a | --all) all=1 ;;
	-v | --verbose | -b | --use-blacklist | -s | --syslog) ;;
	--) shift; break ;;
	-*) echo "modprobe: ERROR: unknown option $1 (lab modprobe stand-in)" >&2; exit 1 ;;
	*) break ;;
	esac
	shift
done
if [ $# -eq 0 ]; then
	echo "modprobe: ERROR: missing parameters. See -h." >&2
	exit 1
fi

norm() { echo "$1" | tr - _; }

# path_of NAME: the module's modules.dep path (kernel/.../name.ko), or nothing.
path_of() {
	awk -F: -v n="$1" '{ p = $1; b = p; sub(/.*\//, "", b); sub(/\.ko(\.[a-z]+)?$/, "", b); gsub(/-/, "_", b)
		if (b == n) { print p; exit } }' "$MODDIR/modules.dep" 2>/dev/null
}

name_of() { b=${1##*/}; b=${b%%.ko*}; norm "$b"; }

deps_of() { awk -F: -v p="$1" '$1 == p { print $2; exit }' "$MODDIR/modules.dep"; }

builtin() {
	awk -v n="$1" '{ b = $0; sub(/.*\//, "", b); sub(/\.ko(\.[a-z]+)?$/, "", b); gsub(/-/, "_", b); if (b == n) { f = 1; exit } }
		END { exit !f }' "$MODDIR/modules.builtin" 2>/dev/null
}

loaded() { awk -v n="$1" '$1 == n { f = 1 } END { exit !f }' "$PROC"; }

refcnt() { awk -v n="$1" '$1 == n { print $3; exit }' "$PROC"; }

# rewrite AWK-PROGRAM [VAR=VALUE...]: /proc/modules through awk, written back in place (it is a bind
# mount: a rename over it would fail).
rewrite() {
	prog=$1
	shift
	t=$(mktemp) || exit 1
	awk "$@" "$prog" "$PROC" >"$t" && cat "$t" >"$PROC"
	rc=$?
	rm -f "$t"
	return $rc
}

# direct PATH: the dependencies PATH uses itself. modules.dep lists every module it needs (transitively);
# one that another of them needs too is that one's, not PATH's (br_netfilter uses bridge; bridge, stp).
direct() {
	all=$(deps_of "$1")
	out=''
	for d in $all; do
		indirect=0
		for e in $all; do
			[ "$e" != "$d" ] || continue
			case " $(deps_of "$e") " in *" $d "*) indirect=1 && break ;; esac
		done
		[ "$indirect" = 1 ] || out="$out $d"
	done
	echo "$out"
}

# use NAME USER: one more user of NAME (the kernel's refcount and "used by" list).
use() {
	rewrite '$1 == n { $3 = $3 + 1; $4 = ($4 == "-" ? u "," : $4 u ",") } { print }' -v n="$1" -v u="$2"
}

load() {
	n=$(norm "$1")
	shift
	if loaded "$n" || builtin "$n"; then
		if [ "$first" = 1 ]; then
			echo "modprobe: ERROR: could not insert '$n': Module already in kernel" >&2
			return 1
		fi
		return 0
	fi
	p=$(path_of "$n")
	if [ -z "$p" ]; then
		[ "$quiet" = 1 ] || echo "modprobe: FATAL: Module $n not found in directory $MODDIR" >&2
		return 1
	fi
	[ "$dry" = 0 ] || return 0
	# modules.dep lists the dependencies nearest first; the deepest loads first, the module last.
	order=$p
	for d in $(deps_of "$p"); do order="$d $order"; done
	for x in $order; do
		xn=$(name_of "$x")
		loaded "$xn" && continue
		echo "$xn 16384 0 - Live 0x0000000000000000" >>"$PROC"
		for y in $(direct "$x"); do use "$(name_of "$y")" "$xn"; done
	done
	mkdir -p "$NODE/modules"
	{
		cat /etc/modprobe.d/*.conf 2>/dev/null | awk -v n="$n" '$1 == "options" { m = $2; gsub(/-/, "_", m); if (m == n) for (i = 3; i <= NF; i++) print $i }'
		for a in "$@"; do echo "$a"; done
	} >"$NODE/modules/$n.params"
}

unload() {
	n=$(norm "$1")
	if builtin "$n"; then
		echo "modprobe: FATAL: Module $n is builtin." >&2
		return 1
	fi
	if ! loaded "$n"; then
		[ "$quiet" = 1 ] || echo "modprobe: FATAL: Module $n is not in kernel." >&2
		return 1
	fi
	if [ "$(refcnt "$n")" -gt 0 ]; then
		echo "modprobe: FATAL: Module $n is in use." >&2
		return 1
	fi
	[ "$dry" = 0 ] || return 0
	rewrite '$1 != n { print }' -v n="$n"
	rm -f "$NODE/modules/$n.params"
	p=$(path_of "$n")
	[ -n "$p" ] || return 0
	unused=''
	for d in $(direct "$p"); do
		dn=$(name_of "$d")
		rewrite '$1 == n { $3 = $3 - 1; u = "," $4; sub("," m ",", ",", u); $4 = substr(u, 2); if ($4 == "") $4 = "-" } { print }' -v n="$dn" -v m="$n"
		[ "$(refcnt "$dn")" != 0 ] || unused="$unused $dn"
	done
	# Dependencies nobody uses any more go too, as modprobe -r removes them.
	for dn in $unused; do
		unload "$dn" 2>/dev/null || true
	done
}

if [ "$remove" = 1 ] || [ "$all" = 1 ]; then
	rc=0
	for m in "$@"; do
		if [ "$remove" = 1 ]; then unload "$m" || rc=1; else load "$m" || rc=1; fi
	done
	exit $rc
fi
load "$@"
