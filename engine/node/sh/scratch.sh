# shellcheck shell=sh
# scratch.sh: the script's private directory T (_nc_scratch), its sweep of
# the directories killed runs left, and the /proc readers the lock shares
# (_nc_lstat, _nc_lholder); scratch.go says why T is named as it is.
_nc_lstat() {
	_nc_ls=
	_nc_lc=
	{ IFS= read -r _nc_ls < "/proc/$1/stat"; } 2> /dev/null || return 1
	_nc_lc=${_nc_ls#*'('}
	_nc_lc=${_nc_lc%')'*}
	_nc_ls=${_nc_ls##*') '}
	_nc_oifs=$IFS
	IFS=' '
	# shellcheck disable=SC2086 # split on purpose: IFS is a space here
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
		# shellcheck disable=SC2154 # _nc_lstart: set by the eval in _nc_lstat
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
	# shellcheck disable=SC2015 # the || branch is for either command failing
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
		if _nc_alive "${_nc_b%%-*}" "${_nc_b#*-}"; then
			if _nc_alive "${_nc_a%%-*}" "${_nc_a#*-}"; then
				continue
			fi
			# Its connection is gone but its script still runs
			# (blocked in a step): what it holds (staged copies with
			# credentials) goes now, the empty directory stays while
			# the script lives, as the record by which a stale lock's
			# takeover finds and ends it (_nc_lend).
			for _nc_g in "$_nc_f"/* "$_nc_f"/.[!.]* "$_nc_f"/..?*; do
				if [ -e "$_nc_g" ] || [ -L "$_nc_g" ]; then rm -rf -- "$_nc_g" 2> /dev/null || :; fi
			done
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
	# shellcheck disable=SC2154 # _nc_td: set by the script header (script.build)
	if { [ -d "$_nc_td" ] || mkdir -p -- "$_nc_td"; } 2> /dev/null; then
		# shellcheck disable=SC2154 # _nc_rnd: set by the script header (script.build)
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
