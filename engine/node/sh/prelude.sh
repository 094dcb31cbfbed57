# shellcheck shell=sh
# prelude.sh: the shell library every node-side script is built on (reads,
# staged candidates, writes with their backups and manifest lines, commands,
# the memo). script.build puts it first in every script; the records it
# prints are described at prelude in script.go. Names start with _nc_ so
# Argv commands and user scripts do not collide with them. Comment lines
# are dropped before a script is sent (shellLib).
_nc_in() {
	_nc_n=0
	while IFS= read -r _nc_l; do
		[ "$_nc_l" = "$1" ] && return 0
		_nc_n=$((_nc_n + 1))
		[ "$_nc_n" -gt 300 ] && break
	done
	echo 'nodeconverge: input marker not found (the shell read further ahead than the filler)' >&2
	exit 112
}
_nc_blob() {
	head -c "$1" > "$2" || { echo "nodeconverge: read $1 bytes of input failed" >&2; exit 113; }
}
_nc_end() {
	IFS= read -r _nc_l
	[ "$_nc_l" = "$1" ] || { echo 'nodeconverge: input truncated' >&2; exit 114; }
}
_nc_size() {
	stat -c %s -- "$@" || { echo "nodeconverge: stat $*" >&2; exit 115; }
}
_nc_copy() {
	_nc_c=$T/c$1
	if [ ! -e "$2" ]; then
		printf 'F %d 0\n%s' "${#2}" "$2"
		return 1
	fi
	if [ -f "$2" ]; then
		# shellcheck disable=SC2154 # _nc_qd: set by _nc_start (main.sh)
		case $_nc_qd:$2 in
		1:/proc/* | 1:/sys/* | 1:*/proc/* | 1:*/sys/*) ;;
		1:*) [ ! -r "$2" ] || _nc_c=$2 ;;
		esac
		[ "$_nc_c" = "$2" ] || cat -- "$2" > "$_nc_c" 2> "$T/e" || {
			[ -n "$3" ] && return 1
			_nc_ferr "$2"
			return 2
		}
	else
		[ -z "$3" ] || return 1
		: > "$_nc_c" || exit 116
	fi
	printf 'P %d\n%s' "${#2}" "$2"
}
_nc_ferr() {
	printf 'F %d E %d\n%s' "${#1}" "$(_nc_size "$T/e")" "$1"
	cat -- "$T/e"
}
_nc_emit() {
	_nc_n=0
	while [ "$_nc_n" -lt "$_nc_nc" ]; do
		eval "set -- \"\$@\" \"\$_nc_o$_nc_n\" \"\$_nc_e$_nc_n\""
		_nc_n=$((_nc_n + 1))
	done
	[ "$#" -gt 0 ] || return 0
	stat -L -c '%s %f %u %g %U %G' -- "$@" > "$T/st" || exit 118
	printf 'S\n'
	_nc_n=$((($# - 2 * _nc_nc) / 2))
	while [ "$_nc_n" -gt 0 ]; do
		set -- "$@" "$1"
		shift 2
		_nc_n=$((_nc_n - 1))
	done
	_nc_n=$((2 * _nc_nc))
	while [ "$_nc_n" -gt 0 ]; do
		set -- "$@" "$1"
		shift
		_nc_n=$((_nc_n - 1))
	done
	if cat -- "$T/st" "$@"; then
		# shellcheck disable=SC2154 # _nc_qm: set by the script header (script.build)
		printf '%s\n' "$_nc_qm"
	elif [ "$_nc_qd" != 1 ]; then
		exit 118
	fi
}
_nc_out() {
	eval "_nc_o$1=\$2 _nc_e$1=\$3"
	_nc_nc=$(($1 + 1))
	printf 'C %d %d\n' "$1" "$4"
}
_nc_cmd() {
	_nc_i=$1
	_nc_input=$2
	_nc_k=$3
	shift 3
	case $_nc_k in
	sh) sh -c "$1" < "$_nc_input" > "$T/o$_nc_i" 2> "$T/e$_nc_i" ;;
	ev)
		_nc_ev=$1
		(
			IFS=' 	
'
			set --
			eval "$_nc_ev"
		) < "$_nc_input" > "$T/o$_nc_i" 2> "$T/e$_nc_i"
		;;
	*) ( command "$@" ) < "$_nc_input" > "$T/o$_nc_i" 2> "$T/e$_nc_i" ;;
	esac
	_nc_rc=$?
	_nc_out "$_nc_i" "$T/o$_nc_i" "$T/e$_nc_i" "$_nc_rc"
}
_nc_memo() {
	_nc_i=$1
	_nc_mn=$2
	shift 2
	_nc_mb=$1
	case $_nc_mb in
	*/*) ;;
	*) _nc_mb=$(command -v -- "$_nc_mb") || _nc_mb= ;;
	esac
	_nc_mk=
	case $_nc_mb in
	/*) _nc_mk=$(stat -L -c '%d.%i.%s.%Y.%Z' -- "$_nc_mb" 2> /dev/null) || _nc_mk= ;;
	esac
	# shellcheck disable=SC2154 # _nc_sdir: set by the script header (script.build)
	_nc_mp=$_nc_sdir/memo/$_nc_mn
	if [ -n "$_nc_mk" ] && [ -f "$_nc_mp.$_nc_mk" ]; then
		_nc_out "$_nc_i" "$_nc_mp.$_nc_mk" /dev/null 0
		return 0
	fi
	_nc_cmd "$_nc_i" /dev/null argv "$@"
	# A run that writes nothing (check mode, explain) keeps no memo.
	[ -z "${_nc_nomemo:-}" ] || return 0
	[ -n "$_nc_mk" ] && [ "$_nc_rc" = 0 ] && [ ! -s "$T/e$_nc_i" ] || return 0
	for _nc_f in "$_nc_mp".*; do
		[ ! -e "$_nc_f" ] || { rm -f -- "$_nc_mp".* || return 0; break; }
	done
	if _nc_pdir "$_nc_sdir/memo" && mv -f -- "$T/o$_nc_i" "$_nc_mp.$_nc_mk" 2> /dev/null; then
		eval "_nc_o$_nc_i=\$_nc_mp.\$_nc_mk"
	fi
	return 0
}
_nc_fail() {
	printf 'X %d %d\n' "$1" "$(_nc_size "$T/e")"
	cat -- "$T/e"
	printf 'Z\n'
	exit 0
}
_nc_ok() {
	printf 'O %d %d\n%s' "$1" "${#bk}" "$bk"
}
_nc_sblob() {
	umask "$4"
	head -c "$2" 2> "$T/e" > "$SCRATCH/$3"
	_nc_r=$?
	umask 022
	[ "$_nc_r" = 0 ] || _nc_fail "$1"
	[ -z "$5" ] || chmod -- "$5" "$SCRATCH/$3" 2> "$T/e" || _nc_fail "$1"
}
_nc_sync() {
	set -- "$@" ${_nc_pb:+"$_nc_pb"} ${_nc_pm:+"$_nc_pm"} ${_nc_pd1:+"$_nc_pd1"} ${_nc_pd2:+"$_nc_pd2"}
	_nc_pb=
	_nc_pm=
	_nc_pd1=
	_nc_pd2=
	[ "$#" -gt 0 ] || return 0
	sync -- "$@" 2> /dev/null || sync
}
_nc_later() {
	if [ -n "$_nc_pd1" ] && [ -n "$_nc_pd2" ]; then _nc_sync; fi
	if [ -z "$_nc_pd1" ]; then _nc_pd1=$1; else _nc_pd2=$1; fi
}
_nc_dir() {
	_nc_d=${1%/*}
	[ -n "$_nc_d" ] || _nc_d=/
}
_nc_pdir() {
	[ ! -d "$1" ] || return 0
	umask 077
	mkdir -p -- "$1"
	_nc_r=$?
	umask 022
	return "$_nc_r"
}
_nc_backup() {
	bk=$BK$1
	if [ ! -e "$bk" ] && [ ! -L "$bk" ]; then
		_nc_pdir "${bk%/*}" || return 1
		cp -a -- "$1" "$bk" || { _nc_wfail "back up $1 to $bk" "${bk%/*}"; return 1; }
		[ -z "$_nc_pb" ] || _nc_sync
		_nc_pb=$bk
	fi
}
_nc_wfail() {
	_nc_wa=$(df -P -- "$2" 2> /dev/null | { read -r _nc_wl; IFS=' ' read -r _nc_wl _nc_wl _nc_wl _nc_wa _nc_wl; echo "$_nc_wa"; })
	if [ "$_nc_wa" = 0 ]; then
		echo "nodeconverge: $1: no space left on device (the file system of $2 is full)" >&2
	else
		echo "nodeconverge: $1 failed" >&2
	fi
}
_nc_attrs() {
	if [ -e "$2" ] && { [ ! -O "$2" ] || [ ! -G "$2" ] || [ -g "${1%/*}" ]; }; then
		chown --reference="$2" -- "$1" || return 1
	fi
	if [ -n "$4" ]; then chown -- "$4" "$1" || return 1; fi
	if [ -n "$5" ]; then chgrp -- "$5" "$1" || return 1; fi
	if [ -n "$3" ]; then
		[ -n "$6" ] || chmod -- "$3" "$1"
	elif [ -e "$2" ]; then
		chmod --reference="$2" -- "$1"
	fi
}
_nc_q() {
	_nc_qr=$1
	_nc_qv=
	while :; do
		case $_nc_qr in
		*\'*)
			_nc_qv=$_nc_qv${_nc_qr%%\'*}\'\\\'\'
			_nc_qr=${_nc_qr#*\'}
			;;
		*) break ;;
		esac
	done
	_nc_qv=\'$_nc_qv$_nc_qr\'
}
_nc_rec() {
	case $2 in "$SD"/*) return 0 ;; esac
	case $2$3$5 in
	*'
'*)
		echo "nodeconverge: $2: a path with a newline cannot be recorded in the run manifest" >&2
		return 1
		;;
	esac
	_nc_pdir "$BK" || return 1
	_nc_q "$2"
	_nc_ml="$1 $_nc_qv"
	_nc_q "$3"
	_nc_ml="$_nc_ml $_nc_qv $4"
	_nc_q "$5"
	printf '%s\n' "$_nc_ml $_nc_qv" >> "$BK/MANIFEST" 2> /dev/null || {
		_nc_wfail "record the op in $BK/MANIFEST" "$BK"
		return 1
	}
	_nc_pm=$BK/MANIFEST
}
_nc_write() {
	bk=
	_nc_p=$1
	if [ -L "$_nc_p" ]; then
		_nc_p=$(readlink -f -- "$_nc_p") || { echo "$1: cannot resolve the symlink" >&2; return 1; }
	fi
	if [ -e "$_nc_p" ] && [ ! -f "$_nc_p" ]; then
		echo "$_nc_p exists and is not a regular file" >&2
		return 1
	fi
	_nc_dir "$_nc_p"
	# shellcheck disable=SC2174 # -m is for the deepest directory only, on purpose: its parents exist or take the umask
	[ -d "$_nc_d" ] || mkdir -p -m 0755 -- "$_nc_d" || return 1
	_nc_e=0
	[ ! -e "$_nc_p" ] || _nc_e=1
	if [ "$6" = 1 ] && [ "$_nc_e" = 1 ]; then _nc_backup "$_nc_p" || return 1; fi
	_nc_rec write "$_nc_p" "" "$_nc_e" "$bk" || return 1
	_nc_dir "$_nc_p"
	_nc_wn=$((_nc_wn + 1))
	# shellcheck disable=SC2154 # _nc_rnd: set by the script header (script.build)
	_nc_t=$_nc_d/.nodeconverge.$_nc_rnd.$_nc_wn
	_nc_m=$3
	_nc_u=$7
	umask "${_nc_u:-022}"
	set -C
	{ true > "$_nc_t"; } 2> /dev/null
	_nc_r=$?
	set +C
	umask 022
	if [ "$_nc_r" != 0 ]; then
		_nc_t=
		_nc_t=$(mktemp -- "$_nc_d/.nodeconverge.XXXXXXXX") || return 1
		# mktemp makes 0600 whatever the umask: chmod gives the mode.
		_nc_u=
		[ -n "$_nc_m" ] || [ -e "$_nc_p" ] || _nc_m=0644
	fi
	if cat -- "$2" > "$_nc_t" && _nc_attrs "$_nc_t" "$_nc_p" "$_nc_m" "$4" "$5" "$_nc_u" &&
		_nc_sync "$_nc_t" && mv -f -T -- "$_nc_t" "$_nc_p"; then
		_nc_t=
		_nc_later "$_nc_d"
		return 0
	fi
	rm -f -- "$_nc_t"
	_nc_t=
	return 1
}
_nc_move() {
	bk=
	if [ ! -e "$2" ] && [ ! -L "$2" ]; then
		echo "$2: no such file or directory" >&2
		return 1
	fi
	_nc_dir "$1"
	# shellcheck disable=SC2174 # -m is for the deepest directory only, on purpose: its parents exist or take the umask
	[ -d "$_nc_d" ] || mkdir -p -m 0755 -- "$_nc_d" || return 1
	_nc_e=0
	if [ -e "$1" ] || [ -L "$1" ]; then _nc_e=1; fi
	_nc_db=
	if [ "$3" = 1 ]; then
		if [ "$_nc_e" = 1 ]; then _nc_backup "$1" || return 1; _nc_db=$bk; fi
		_nc_backup "$2" || return 1
	fi
	_nc_rec move "$1" "$2" "$_nc_e" "$_nc_db" || return 1
	_nc_sync
	mv -f -T -- "$2" "$1" || return 1
	_nc_dir "$2"
	_nc_later "$_nc_d"
	_nc_dir "$1"
	_nc_later "$_nc_d"
}
_nc_remove() {
	bk=
	if [ ! -e "$1" ] && [ ! -L "$1" ]; then return 0; fi
	if [ -d "$1" ] && [ ! -L "$1" ]; then
		echo "$1 is a directory; refusing to remove it" >&2
		return 1
	fi
	if [ "$2" = 1 ]; then _nc_backup "$1" || return 1; fi
	_nc_rec remove "$1" "" 1 "$bk" || return 1
	_nc_sync
	rm -f -- "$1" || return 1
	_nc_dir "$1"
	_nc_later "$_nc_d"
}
_nc_keep() {
	bk=$BK$1
	if [ ! -f "$1" ]; then
		echo "$1: not a regular file; cannot keep its value" >&2
		return 1
	fi
	if [ ! -e "$bk" ]; then
		_nc_pdir "${bk%/*}" || return 1
		# shellcheck disable=SC2015 # the || branch is for either command failing
		cat -- "$1" > "$bk.new" && _nc_sync "$bk.new" && mv -f -- "$bk.new" "$bk" || {
			rm -f -- "$bk.new"
			_nc_wfail "keep $1 in $bk" "${bk%/*}"
			return 1
		}
	fi
	_nc_rec keep "$1" "" 1 "$bk"
}
_nc_prune() {
	_nc_pd=$1
	_nc_pk=$2
	shift 2
	_nc_n=0
	for _nc_f in "$_nc_pd"/*; do [ -d "$_nc_f" ] && _nc_n=$((_nc_n + 1)); done
	for _nc_f in "$_nc_pd"/*; do
		[ "$_nc_n" -le "$_nc_pk" ] && break
		[ -d "$_nc_f" ] || continue
		_nc_kp=0
		for _nc_r in "$@"; do [ "${_nc_f##*/}" = "$_nc_r" ] && _nc_kp=1; done
		[ "$_nc_kp" = 1 ] && continue
		rm -rf -- "$_nc_f" || return 1
		_nc_n=$((_nc_n - 1))
	done
}
# _nc_vfail: after a round trip's writes the node does not hold what the controller wrote
# (verify.go): the difference ($1) is reported as X -2 and the script ends before anything after
# the writes runs.
_nc_vfail() {
	printf '%s\n' "$1" > "$T/e"
	_nc_fail -2
}
