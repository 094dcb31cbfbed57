# shellcheck shell=sh
# rollback.sh: the run manifest undone, newest entry first (Host.Rollback);
# rollback.go describes the manifest and what each undo does.
_nc_mpush() {
	if [ "$#" != 5 ]; then
		echo "nodeconverge: malformed manifest entry ($# words): $*" >&2
		return 1
	fi
	_nc_mn=$((_nc_mn + 1))
	eval "_nc_mk$_nc_mn=\$1 _nc_mp$_nc_mn=\$2 _nc_mf$_nc_mn=\$3 _nc_me$_nc_mn=\$4 _nc_mb$_nc_mn=\$5"
}
_nc_done() {
	printf 'O %d %d\n%s' "$1" "${#2}" "$2"
}
_nc_restore() {
	if [ ! -e "$2" ] && [ ! -L "$2" ]; then
		echo "$1: its backup $2 is missing; cannot restore it" >&2
		return 1
	fi
	_nc_dir "$1"
	# shellcheck disable=SC2154,SC2174 # _nc_d: set by _nc_dir (prelude.sh); -m is for the deepest directory only, on purpose: its parents exist or take the umask
	[ -d "$_nc_d" ] || mkdir -p -m 0755 -- "$_nc_d" || return 1
	_nc_rd=$(mktemp -d -- "$_nc_d/.nodeconverge.XXXXXXXX") || return 1
	_nc_t=$_nc_rd
	if cp -a -- "$2" "$_nc_rd/f" && _nc_sync "$_nc_rd/f" && mv -f -T -- "$_nc_rd/f" "$1"; then
		rmdir -- "$_nc_rd"
		_nc_t=
		_nc_sync "$_nc_d"
		return 0
	fi
	rm -rf -- "$_nc_rd"
	_nc_t=
	return 1
}
# _nc_same LIVE BACKUP: LIVE is a regular file with BACKUP's content,
# mode and owner, so there is nothing of it to restore. An entry is
# appended before its op runs; an op that then failed (a write onto an
# immutable file: EPERM) changed nothing, and restoring it would fail the
# same way and report a rollback failure that is not true. A rollback
# restores only what the run changed. Symbolic links, other file types and
# a node without cmp(1) or stat -c fall back to restoring.
_nc_same() {
	[ -f "$1" ] && [ ! -L "$1" ] && [ -f "$2" ] && [ ! -L "$2" ] || return 1
	_nc_s1=$(stat -c '%a %u %g %s' -- "$1" 2> /dev/null) || return 1
	_nc_s2=$(stat -c '%a %u %g %s' -- "$2" 2> /dev/null) || return 1
	[ -n "$_nc_s1" ] && [ "$_nc_s1" = "$_nc_s2" ] || return 1
	cmp -s -- "$1" "$2" 2> /dev/null
}
_nc_undo() {
	case $1 in
	write | remove)
		if [ "$4" = 1 ]; then
			_nc_b=$5
			[ -n "$_nc_b" ] || _nc_b=$BK$2
			if [ ! -e "$_nc_b" ] && [ ! -L "$_nc_b" ]; then
				echo "$2: the op kept no backup; cannot restore it" >&2
				return 1
			fi
			if _nc_same "$2" "$_nc_b"; then
				return 0
			fi
			_nc_restore "$2" "$_nc_b" || return 1
			_nc_done "$6" "$2"
		elif [ -e "$2" ] || [ -L "$2" ]; then
			if [ -d "$2" ] && [ ! -L "$2" ]; then
				echo "$2 is a directory; refusing to remove it" >&2
				return 1
			fi
			rm -f -- "$2" || return 1
			_nc_dir "$2"
			_nc_sync "$_nc_d"
			_nc_done "$6" "$2"
		fi
		;;
	move)
		if [ ! -e "$3" ] && [ ! -L "$3" ] && { [ -e "$2" ] || [ -L "$2" ]; }; then
			_nc_dir "$3"
			# shellcheck disable=SC2174 # -m is for the deepest directory only, on purpose: its parents exist or take the umask
			[ -d "$_nc_d" ] || mkdir -p -m 0755 -- "$_nc_d" || return 1
			mv -f -T -- "$2" "$3" || return 1
			_nc_sync "$_nc_d"
			_nc_done "$6" "$3"
		fi
		if [ "$4" = 1 ]; then
			if [ -z "$5" ]; then
				echo "$2: the move replaced it without a backup; cannot restore it" >&2
				return 1
			fi
			if _nc_same "$2" "$5"; then
				return 0
			fi
			_nc_restore "$2" "$5" || return 1
			_nc_done "$6" "$2"
		fi
		;;
	keep)
		if [ ! -f "$5" ]; then
			echo "$2: its saved value $5 is missing; cannot restore it (it stays at this run's value)" >&2
			return 1
		fi
		cat -- "$5" > "$2" 2> "$T/ke" || {
			echo "$2: writing back its value from before the run failed, so it stays at this run's value: $(cat -- "$T/ke")" >&2
			return 1
		}
		_nc_done "$6" "$2"
		;;
	*)
		echo "nodeconverge: unknown manifest op $1" >&2
		return 1
		;;
	esac
}
_nc_rollback() {
	_nc_mn=0
	[ -f "$BK/MANIFEST" ] || return 0
	while IFS= read -r _nc_l; do
		eval "_nc_mpush $_nc_l" > "$T/e" 2>&1 || _nc_fail "$_nc_mn"
	done < "$BK/MANIFEST"
	_nc_i=$_nc_mn
	_nc_bad=0
	while [ "$_nc_i" -gt 0 ]; do
		eval "_nc_undo \"\$_nc_mk$_nc_i\" \"\$_nc_mp$_nc_i\" \"\$_nc_mf$_nc_i\" \"\$_nc_me$_nc_i\" \"\$_nc_mb$_nc_i\" $_nc_i" 2> "$T/e" || {
			_nc_bad=1
			printf 'X %d %d\n' "$_nc_i" "$(_nc_size "$T/e")"
			cat -- "$T/e"
		}
		_nc_i=$((_nc_i - 1))
	done
	# Undone: keep the backups for inspection, but out of the way, so a
	# later Apply in this run starts a fresh manifest and fresh backups
	# (a stale "first backup" must not be restored by a second rollback).
	if [ "$_nc_bad" = 0 ]; then
		mv -T -- "$BK" "$BK.rolled-back.$(date +%Y%m%dT%H%M%S).$$" || {
			echo "nodeconverge: move the undone manifest aside failed" > "$T/e"
			_nc_fail 0
		}
	fi
}
