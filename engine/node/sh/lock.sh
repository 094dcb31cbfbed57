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
			_nc_lemit O 1 "$_nc_f"
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
