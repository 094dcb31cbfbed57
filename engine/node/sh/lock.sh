# shellcheck shell=sh
# lock.sh: the node lock (_nc_lock, _nc_unlock), defined in the body of a
# lock script after its variables (Host.lockScript: SD, LD, RUN, MODE,
# LNAME, OWNER); lock.go describes the records and the takeover rule.
_nc_lguard() {
	umask 077
	[ -d "$LD" ] || mkdir -p -- "$LD" || { umask 022; return 1; }
	umask 022
	exec 9>> "$SD/lock.guard" || return 1
	flock -w 30 9 || { echo "nodeconverge: flock $SD/lock.guard: busy for 30s or flock(1) missing" >&2; return 1; }
}
_nc_lread() {
	_nc_orun=
	_nc_opid=
	_nc_ocomm=
	_nc_ostart=
	while IFS= read -r _nc_kv; do
		case $_nc_kv in
		run=*) _nc_orun=${_nc_kv#run=} ;;
		holder_pid=*) _nc_opid=${_nc_kv#holder_pid=} ;;
		holder_comm=*) _nc_ocomm=${_nc_kv#holder_comm=} ;;
		holder_start=*) _nc_ostart=${_nc_kv#holder_start=} ;;
		esac
	done < "$1"
}
_nc_lalive() {
	case $_nc_opid in '' | *[!0-9]*) return 1 ;; esac
	_nc_lstat "$_nc_opid" || return 1
	# shellcheck disable=SC2154 # _nc_lstate, _nc_lc, _nc_lstart: set by _nc_lstat (scratch.sh)
	[ "$_nc_lstate" != Z ] && [ "$_nc_lstate" != X ] &&
		[ "$_nc_lc" = "$_nc_ocomm" ] && [ "$_nc_lstart" = "$_nc_ostart" ]
}
# _nc_lend HOLDER_PID HOLDER_START: before a stale holder's lock is taken
# over, its scripts that still run are ended. A dead connection does not
# end them: sshd closes a session's pipes without a signal, so a script
# blocked in a step (a restart's round trip) goes on, and would write
# under the new run's lock. Every script's private directory is named
# after its holder and itself (_nc_scratch: HP-HS.PID-START.RND, kept while
# PID lives, see _nc_sweep), so they are found by name; each live one is
# SIGKILLed with every process below it, and each must be gone (or a
# zombie) within 10 s, else the takeover is refused. _nc_lended is set to
# "pid(comm) ..." of what was ended.
_nc_lend() {
	_nc_lended=
	_nc_lk=
	# shellcheck disable=SC2154 # _nc_td: set by the script header (script.build)
	for _nc_d in "$_nc_td/$1-$2."* "${TMPDIR:-/tmp}/nodeconverge.$1-$2."*; do
		[ -e "$_nc_d" ] || continue
		_nc_n=${_nc_d##*/}
		_nc_n=${_nc_n#nodeconverge.}
		_nc_n=${_nc_n#"$1-$2."}
		_nc_sp=${_nc_n%%-*}
		_nc_n=${_nc_n#*-}
		_nc_alive "$_nc_sp" "${_nc_n%%.*}" || continue
		_nc_ltree "$_nc_sp"
	done
	[ -n "$_nc_lk" ] || return 0
	_nc_lifs=$IFS
	IFS=' '
	for _nc_x in $_nc_lk; do
		kill -KILL "${_nc_x%%:*}" 2> /dev/null || :
	done
	_nc_li=0
	while :; do
		_nc_lleft=
		for _nc_x in $_nc_lk; do
			if _nc_alive "${_nc_x%%:*}" "${_nc_x#*:}"; then _nc_lleft="$_nc_lleft ${_nc_x%%:*}"; fi
		done
		[ -n "$_nc_lleft" ] || break
		_nc_li=$((_nc_li + 1))
		if [ "$_nc_li" -gt 100 ]; then
			IFS=$_nc_lifs
			echo "nodeconverge: the stale run's node-side processes$_nc_lleft did not end within 10s of SIGKILL: its lock is not taken over" >&2
			return 1
		fi
		sleep 0.1
	done
	IFS=$_nc_lifs
}
# _nc_ltree PID: PID and every process below it, as "pid:start" in _nc_lk
# and "pid(comm)" in _nc_lended.
_nc_ltree() {
	_nc_lq=" $1 "
	_nc_lstat "$1" || return 0
	_nc_lk="$_nc_lk $1:$_nc_lstart"
	_nc_lended="$_nc_lended $1($_nc_lc)"
	_nc_lmore=1
	while [ -n "$_nc_lmore" ]; do
		_nc_lmore=
		for _nc_s in /proc/[0-9]*/stat; do
			_nc_x=${_nc_s#/proc/}
			_nc_x=${_nc_x%/stat}
			case $_nc_lq in *" $_nc_x "*) continue ;; esac
			_nc_lstat "$_nc_x" || continue
			# shellcheck disable=SC2154 # _nc_lppid: set by _nc_lstat (scratch.sh)
			case $_nc_lq in
			*" $_nc_lppid "*)
				_nc_lq="$_nc_lq$_nc_x "
				_nc_lk="$_nc_lk $_nc_x:$_nc_lstart"
				_nc_lended="$_nc_lended $_nc_x($_nc_lc)"
				_nc_lmore=1
				;;
			esac
		done
	done
}
_nc_lemit() {
	printf '%s %d %d\n' "$1" "$2" "$(_nc_size "$3")"
	cat -- "$3"
}
_nc_lock() {
	_nc_lguard > "$T/e" 2>&1 || _nc_fail 1
	_nc_lholder > "$T/e" 2>&1 || _nc_fail 1
	for _nc_f in "$LD"/*; do
		[ -f "$_nc_f" ] || continue
		_nc_lread "$_nc_f"
		if [ "$_nc_orun" = "$RUN" ]; then
			rm -f -- "$_nc_f"
			continue
		fi
		if ! _nc_lalive; then
			_nc_lend "$_nc_opid" "$_nc_ostart" > "$T/e" 2>&1 || _nc_fail 1
			cp -- "$_nc_f" "$T/o" > "$T/e" 2>&1 || _nc_fail 1
			printf 'ended=%s\n' "${_nc_lended# }" >> "$T/o" || _nc_fail 1
			_nc_lemit O 1 "$T/o"
			rm -f -- "$_nc_f"
			continue
		fi
		if [ "$MODE" = exclusive ] || [ "${_nc_f##*/}" = x ]; then
			_nc_lemit X 0 "$_nc_f"
			_nc_lheld=1
			return 0
		fi
	done
	_nc_lt=$(mktemp -- "$LD/.new.XXXXXXXX") || _nc_fail 1
	_nc_t=$_nc_lt
	# shellcheck disable=SC2154 # _nc_hp, _nc_hc, _nc_hs: set by _nc_lholder (scratch.sh)
	{
		cat -- "$OWNER"
		printf 'mode=%s\nholder_pid=%s\nholder_comm=%s\nholder_start=%s\nnode_shell_pid=%s\n' \
			"$MODE" "$_nc_hp" "$_nc_hc" "$_nc_hs" "$$"
	} > "$_nc_lt" || _nc_fail 1
	mv -f -T -- "$_nc_lt" "$LD/$LNAME" > "$T/e" 2>&1 || _nc_fail 1
	_nc_t=
	_nc_lemit O 0 "$LD/$LNAME"
}
_nc_unlock() {
	_nc_lguard > "$T/e" 2>&1 || _nc_fail 1
	[ -f "$LD/$LNAME" ] || return 0
	_nc_lread "$LD/$LNAME"
	if [ "$_nc_orun" != "$RUN" ]; then
		_nc_lemit X 0 "$LD/$LNAME"
		return 0
	fi
	rm -f -- "$@" "$LD/$LNAME" > "$T/e" 2>&1 || _nc_fail 1
}
