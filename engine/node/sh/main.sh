# shellcheck shell=sh
# main.sh: the start and the end of every script's _nc_main (script.build
# wraps the generated body in `_nc_main() { _nc_start ... _nc_finish }`).
#
# LC_ALL=C makes globs sort bytewise and ${#x} count bytes; IFS is emptied
# so an unquoted glob pattern is expanded but never split.
#
# The private directory T (staged candidates, copies of the files read,
# command output: it may hold credentials) lives under the state directory
# ($_nc_td, see scratch.sh), never in the node's shared /tmp. The EXIT trap
# removes it however the script ends; the signal traps turn a signal into
# an exit so the EXIT trap runs. PIPE is among them: when the controller
# dies, sshd closes the session's pipes without signalling the script, and
# the script learns of it at its next write. The EXIT trap also removes a
# write's temporary file ($_nc_t) when a signal arrives between mktemp and
# rename, and syncs the directories a change left pending (_nc_later). A
# script killed outright (SIGKILL, a reboot) leaves T behind; the next
# script on the node removes it (_nc_sweep).
_nc_start() {
	LC_ALL=C
	export LC_ALL
	umask 022
	T=
	_nc_t=
	_nc_pb=
	_nc_pm=
	_nc_pd1=
	_nc_pd2=
	_nc_nc=0
	_nc_qd=0
	_nc_wn=0
	trap '[ -z "$_nc_pd1" ] || _nc_sync; [ -z "$T" ] || rm -rf -- "$T"; [ -z "$_nc_t" ] || rm -f -- "$_nc_t"' EXIT
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 141' PIPE
	trap 'exit 143' TERM
	_nc_scratch || exit 111
	IFS=
}
# _nc_finish: what the body left pending is synced, and Z says the script
# ran to its end.
_nc_finish() {
	_nc_sync
	printf 'Z\n'
}
