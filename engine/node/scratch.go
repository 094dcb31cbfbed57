package node

// Scratch directories on the node.
//
// Every script works in a private directory T: copies of the files a Query
// read, the files a Stage lays out for validation (a containerd tree with a
// drop-in's registry password, a copy's candidate), command output. Those
// may hold credentials, so T is made mode 0700 under the state directory
// (StateDir/tmp, itself 0700), not in the node's shared /tmp. The script
// removes T when it ends, on any exit and on HUP, INT, PIPE and TERM (see
// mainHead). Only SIGKILL or a crash of the node can leave T behind, so
// every script also sweeps: a directory in StateDir/tmp is removed when the
// run that made it is gone.
//
// Whose is a directory is in its name, written before mkdir creates it:
//
//	<holder pid>-<holder start>.<shell pid>-<shell start>.<random>
//
// The random part comes with the script ($_nc_rnd), so making T costs a
// mkdir, not a mktemp in a command substitution (a fork more); mkdir fails
// on a name that exists, so T is never a directory someone else made.
// The holder is the process holding the run's connection on the node (see
// the lock: the per-connection sshd, or the controller itself for a local
// connection), the shell is the script's own. Start times (clock ticks
// since boot, /proc/<pid>/stat field 22) rule out pid reuse. A directory is
// kept while both are alive; when the controller is killed its connection's
// sshd exits, so the next run removes the killed run's directories even
// while a command it started (a hung `containerd config dump`) still runs.
//
// When the state directory cannot hold T (read-only, or its file system
// full), the script falls back to the system temporary directory, under the
// name nodeconverge.<the same owner fields>.<random>, swept by the same
// rule, so check mode still works on such a node.

// ScratchDirName is the directory under the state directory that holds the
// scripts' private directories.
const ScratchDirName = "tmp"

// scratchPrelude makes T (_nc_scratch) and holds the /proc readers the lock
// shares. It reads /proc with the shell's own read, so the few processes
// every script walks cost no fork.
const scratchPrelude = `_nc_lstat() {
	_nc_ls=
	_nc_lc=
	{ IFS= read -r _nc_ls < "/proc/$1/stat"; } 2> /dev/null || return 1
	_nc_lc=${_nc_ls#*'('}
	_nc_lc=${_nc_lc%')'*}
	_nc_ls=${_nc_ls##*') '}
	_nc_oifs=$IFS
	IFS=' '
	set -- $_nc_ls
	IFS=$_nc_oifs
	_nc_lstate=$1
	_nc_lppid=$2
	eval "_nc_lstart=\${20}"
}
_nc_lholder() {
	if [ -n "${_nc_hold:-}" ]; then
		_nc_lstat "$_nc_hold" || {
			echo "nodeconverge: the controller process $_nc_hold is not in this node's /proc (a host root needs the host's PID namespace)" >&2
			return 1
		}
		_nc_hp=$_nc_hold
		_nc_hc=$_nc_lc
		_nc_hs=$_nc_lstart
		return 0
	fi
	_nc_p=$$
	_nc_hp=
	_nc_lfirst=
	while [ -n "$_nc_p" ] && [ "$_nc_p" -gt 1 ]; do
		_nc_lstat "$_nc_p" || break
		case $_nc_lc in
		sshd*)
			_nc_hp=$_nc_p
			_nc_hc=$_nc_lc
			_nc_hs=$_nc_lstart
			return 0
			;;
		esac
		if [ -z "$_nc_lfirst" ]; then _nc_lfirst=$_nc_lppid; fi
		_nc_p=$_nc_lppid
	done
	[ -n "$_nc_lfirst" ] && _nc_lstat "$_nc_lfirst" || {
		echo "nodeconverge: cannot find the process holding this connection in /proc" >&2
		return 1
	}
	_nc_hp=$_nc_lfirst
	_nc_hc=$_nc_lc
	_nc_hs=$_nc_lstart
}
_nc_alive() {
	case $1 in '' | *[!0-9]*) return 1 ;; esac
	_nc_lstat "$1" || return 1
	[ "$_nc_lstate" != Z ] && [ "$_nc_lstate" != X ] && [ "$_nc_lstart" = "$2" ]
}
_nc_sweep() {
	for _nc_f in "$1/$2"*; do
		[ "$_nc_f" != "$T" ] || continue
		_nc_n=${_nc_f##*/}
		_nc_n=${_nc_n#"$2"}
		case $_nc_n in
		[0-9]*-[0-9]*.[0-9]*-[0-9]*.*) ;;
		*) continue ;;
		esac
		_nc_a=${_nc_n%%.*}
		_nc_b=${_nc_n#*.}
		_nc_b=${_nc_b%%.*}
		if _nc_alive "${_nc_a%%-*}" "${_nc_a#*-}" && _nc_alive "${_nc_b%%-*}" "${_nc_b#*-}"; then
			continue
		fi
		rm -rf -- "$_nc_f" 2> /dev/null || :
	done
}
_nc_scratch() {
	_nc_lstat $$ || { echo "nodeconverge: cannot read /proc/$$/stat" >&2; return 1; }
	_nc_tn=$$-$_nc_lstart
	if _nc_lholder > /dev/null 2>&1; then
		_nc_tn=$_nc_hp-$_nc_hs.$_nc_tn
	else
		_nc_tn=$_nc_tn.$_nc_tn
	fi
	_nc_tt=${TMPDIR:-/tmp}
	umask 077
	if { [ -d "$_nc_td" ] || mkdir -p -- "$_nc_td"; } 2> /dev/null; then
		mkdir -- "$_nc_td/$_nc_tn.$_nc_rnd" 2> /dev/null && T=$_nc_td/$_nc_tn.$_nc_rnd
	fi
	if [ -z "$T" ]; then
		T=$(mktemp -d -- "$_nc_tt/nodeconverge.$_nc_tn.XXXXXXXX") || T=
	fi
	umask 022
	if [ -z "$T" ]; then
		echo "nodeconverge: cannot make a private directory in $_nc_td or $_nc_tt" >&2
		return 1
	fi
	_nc_sweep "$_nc_td" ""
	_nc_sweep "$_nc_tt" nodeconverge.
}
`
