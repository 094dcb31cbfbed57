#!/bin/sh
# systemctl STAND-IN for the nodeconverge local lab.
#
# systemd cannot run as PID 1 here (the lab nodes are mount namespaces on one machine, not machines),
# so this script plays the part of `systemctl`. It does not pretend: every state it reports is real
# state it keeps, and every start starts a real process.
#
# Units: containerd, built in (it really starts and stops this node's containerd daemon, see below),
# and every unit file under the node's own /etc/systemd/system and /run/systemd/system (per node, bind
# mounted by lab.sh). Units of the host's /lib/systemd/system are not this node's and are not found.
# For a unit file's service: Type=simple/exec/notify start ExecStart= as a background process (setsid,
# every fd redirected to $NODE/systemd/UNIT.log), Type=oneshot runs it to completion (RemainAfterExit=
# keeps it active); ExecStart is run by `sh -c "exec ..."` (systemd splits words itself: the lab's units
# use no shell syntax). ExecReload= for reload, with $MAINPID set.
#
# Kept state, in $NODE/systemd/ (the node's directory on the host):
#   UNIT.pid        the main process of a running service (alive: active; dead without stop: failed)
#   UNIT.state      "active" for a oneshot with RemainAfterExit, "failed" for a failed start
#   loaded/UNIT     the unit file as systemd last loaded it (at the first start, or daemon-reload): a
#                   file changed since is reported NeedDaemonReload=yes, and start runs the loaded one,
#                   as systemd does, until daemon-reload
#   daemon-reloads  how many times daemon-reload ran (tests compare runs)
# enable/disable are the real symlinks in /etc/systemd/system/TARGET.wants/ from [Install] WantedBy=
# (RequiredBy= into .requires/); mask is the real /etc/systemd/system/UNIT -> /dev/null link.
# is-enabled reads those links: enabled (0), disabled (1), static (0, no [Install]), masked (1).
#
# containerd: start returns when the daemon answers on /run/containerd/containerd.sock, or exits 1 with
# the log tail when the process died first (systemd: "Job for containerd.service failed"); stop is
# SIGTERM, wait, SIGKILL after a deadline; restart is stop + start; reload is refused (its unit has no
# ExecReload). Its unit is Debian's (/lib/systemd/system/containerd.service, WantedBy=multi-user.target);
# lab.sh enables it at setup, as the package does.
#
# Commands: start stop restart try-restart reload reload-or-restart is-active is-failed is-enabled
# enable disable mask unmask daemon-reload show (-p/--property) status list-unit-files.
# lab.sh installs this file as /usr/local/sbin/systemctl inside each node with @NODE@ replaced by the
# node's directory on the host (visible inside the node, since only a few paths are bind-mounted).
set -u

NODE=@NODE@
PIDFILE=$NODE/containerd.pid
LOG=$NODE/containerd.log
BINFILE=$NODE/containerd-bin
SOCK=/run/containerd/containerd.sock
START_DEADLINE=${LAB_CONTAINERD_START_TIMEOUT:-120}
STOP_DEADLINE=${LAB_CONTAINERD_STOP_TIMEOUT:-15}

SD=$NODE/systemd
UNIT_DIRS="/etc/systemd/system /run/systemd/system"

quiet=0
now=0
props=
cmd=
unit=
want_prop=0
for a in "$@"; do
	if [ "$want_prop" = 1 ]; then
		props="$props,$a"
		want_prop=0
		continue
	fi
	case $a in
	-q | --quiet) quiet=1 ;;
	--now) now=1 ;;
	-p | --property) want_prop=1 ;;
	--property=*) props="$props,${a#--property=}" ;;
	-p*) props="$props,${a#-p}" ;;
	--no-pager | --no-block | --no-ask-password | --system | -l | --full | --force | -f | --no-reload | --plain | --value) ;;
	-*) ;;
	*)
		if [ -z "$cmd" ]; then cmd=$a; elif [ -z "$unit" ]; then unit=$a; fi
		;;
	esac
done

# alive PID: true when PID is a live (not zombie) process. The lab's PID 1 may not reap orphans, so a
# dead daemon can linger as a zombie and `kill -0` alone would call it running.
alive() {
	[ -n "$1" ] || return 1
	[ -r "/proc/$1/stat" ] || return 1
	st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

mainpid() {
	if [ -r "$PIDFILE" ]; then cat "$PIDFILE"; fi
}

state() {
	p=$(mainpid)
	if [ -z "$p" ]; then
		echo inactive
	elif alive "$p"; then
		echo active
	else
		# A pid file without a live process: the daemon died without `stop` (crash, refused config).
		echo failed
	fi
}

now() { date +%s; }
# stamp is the time of a line the stand-in logs, to the nanosecond: tests order restarts across nodes
# by it (a rolling restart's next node stops only after the previous one answers).
stamp() { date +%Y-%m-%dT%H:%M:%S.%N%:z; }

# booted: the daemon says it serves (the line containerd logs where a systemd unit of Type=notify would
# get READY=1), in the part of the log this start wrote. Cheap: no Go binary is started per poll, so
# many nodes starting at once on a loaded machine do not slow each other down.
booted() {
	[ -S "$SOCK" ] && tail -c +"$((log_off + 1))" "$LOG" 2>/dev/null | grep -q 'containerd successfully booted'
}

# ping_daemon: the daemon answers a real API call. Generous timeouts: on a loaded machine a Go
# client can take seconds to start.
ping_daemon() {
	[ -S "$SOCK" ] || return 1
	timeout 20 ctr --address "$SOCK" --connect-timeout 10s version >/dev/null 2>&1
}

# next_delay: poll interval backoff, 50 ms doubling to 1 s.
next_delay() {
	case $delay in
	0.05) delay=0.1 ;;
	0.1) delay=0.2 ;;
	0.2) delay=0.4 ;;
	0.4) delay=0.8 ;;
	*) delay=1 ;;
	esac
}

# import_image: the lab's sandbox image (lab/build-standins.sh) into a daemon that has never had it (a
# node started with --no-containerd or scenario none): the lab has no registry, and a pod sandbox
# needs it. Once per node; lab.sh's own imports leave the same mark.
# Single-quoted by lab.sh (the repository's path may hold a space).
IMAGE='@IMAGE@'
import_image() {
	[ -e "$NODE/sandbox-image.imported" ] || [ ! -r "$IMAGE" ] && return 0
	if ctr --address "$SOCK" -n k8s.io images import "$IMAGE" >>"$LOG" 2>&1; then
		: >"$NODE/sandbox-image.imported"
	fi
}

do_start() {
	p=$(mainpid)
	if alive "$p"; then return 0; fi
	bin=containerd
	if [ -r "$BINFILE" ]; then bin=$(cat "$BINFILE"); fi
	# The daemon's own generation's runc shim first on its PATH: a lab build of containerd has one
	# beside it (BIN-shim-runc-v2, lab/build-containerd.sh); Debian's 1.6 shim cannot start a 1.7 or
	# 2.x daemon's sandboxes. The daemon resolves the shim once, so this is done before it starts.
	shim=/usr/local/sbin/containerd-shim-runc-v2
	case $bin in
	/*) if [ -x "$bin-shim-runc-v2" ]; then ln -sf "$bin-shim-runc-v2" "$shim"; else rm -f "$shim"; fi ;;
	*) rm -f "$shim" ;;
	esac
	printf '%s lab systemctl: starting %s --config /etc/containerd/config.toml\n' "$(stamp)" "$bin" >>"$LOG"
	# Every fd of the daemon is redirected: an inherited pipe would keep the caller's SSH session open
	# until containerd exits.
	log_off=$(wc -c <"$LOG")
	# GOMAXPROCS=1 is the lab's, not systemd's: an idle containerd 1.6 costs 17 clock ticks of CPU a
	# minute with the Go default and 4 with one P (measured on one lab node, 60 s each), and a
	# 1000-node lab is 1000 idle daemons on 2 cores. What the daemon loads and serves is unchanged.
	GOMAXPROCS=1 setsid "$bin" --config /etc/containerd/config.toml </dev/null >>"$LOG" 2>&1 &
	p=$!
	echo "$p" >"$PIDFILE"
	end=$(($(now) + START_DEADLINE))
	delay=0.05
	while :; do
		if ! alive "$p"; then
			echo "Job for containerd.service failed because the control process exited with error code." >&2
			echo "--- containerd log tail ($LOG) ---" >&2
			tail -n 20 "$LOG" >&2
			return 1
		fi
		if booted && ping_daemon; then
			import_image
			printf '%s lab systemctl: containerd (pid %s) answers\n' "$(stamp)" "$p" >>"$LOG"
			return 0
		fi
		if [ "$(now)" -ge "$end" ]; then
			echo "Job for containerd.service failed: daemon did not answer on $SOCK within ${START_DEADLINE}s" >&2
			tail -n 20 "$LOG" >&2
			return 1
		fi
		sleep "$delay"
		next_delay
	done
}

do_stop() {
	p=$(mainpid)
	if ! alive "$p"; then
		rm -f "$PIDFILE"
		return 0
	fi
	printf '%s lab systemctl: stopping containerd (pid %s)\n' "$(stamp)" "$p" >>"$LOG"
	kill -TERM "$p" 2>/dev/null
	end=$(($(now) + STOP_DEADLINE))
	while alive "$p"; do
		if [ "$(now)" -ge "$end" ]; then
			kill -KILL "$p" 2>/dev/null
			end=$(($(now) + 5))
			while alive "$p"; do
				if [ "$(now)" -ge "$end" ]; then
					echo "containerd (pid $p) survived SIGKILL" >&2
					return 1
				fi
				sleep 0.05
			done
			break
		fi
		sleep 0.05
	done
	rm -f "$PIDFILE"
}

# ---------------------------------------------------------------------------------------------------
# units other than containerd

# full NAME: the unit's full name (foo -> foo.service).
full() {
	case $1 in
	*.service | *.socket | *.timer | *.target | *.mount | *.path | *.slice | *.scope) echo "$1" ;;
	*) echo "$1.service" ;;
	esac
}

# unit_file UNIT: the path of the unit's file in the node's unit directories, or nothing.
unit_file() {
	for d in $UNIT_DIRS; do
		if [ -e "$d/$1" ] || [ -L "$d/$1" ]; then
			echo "$d/$1"
			return 0
		fi
	done
	return 1
}

masked() {
	for d in /etc/systemd/system /run/systemd/system; do
		if [ -L "$d/$1" ] && [ "$(readlink "$d/$1")" = /dev/null ]; then return 0; fi
	done
	return 1
}

# key FILE SECTION KEY: the last value of KEY in [SECTION] of FILE (all of them with "all" as $4).
key() {
	awk -v sec="[$2]" -v k="$3" -v all="${4:-}" '
		/^[ \t]*\[/ { in_sec = ($0 ~ "^[ \t]*\\" sec) }
		in_sec && index($0, k "=") == 1 { v = substr($0, length(k) + 2); if (all) print v }
		END { if (!all && v != "") print v }' "$1" 2>/dev/null
}

# loaded_file UNIT: the definition systemd would run: the loaded copy, else the file (loaded now).
loaded_file() {
	f=$(unit_file "$1") || return 1
	mkdir -p "$SD/loaded"
	[ -e "$SD/loaded/$1" ] || cp -- "$f" "$SD/loaded/$1"
	echo "$SD/loaded/$1"
}

need_reload() {
	f=$(unit_file "$1") || { echo no; return; }
	if [ -e "$SD/loaded/$1" ] && ! cmp -s -- "$f" "$SD/loaded/$1"; then echo yes; else echo no; fi
}

gen_state() {
	if masked "$1"; then
		echo inactive
		return
	fi
	p=
	[ -r "$SD/$1.pid" ] && p=$(cat "$SD/$1.pid")
	if [ -n "$p" ]; then
		if alive "$p"; then echo active; else echo failed; fi
		return
	fi
	if [ -r "$SD/$1.state" ]; then cat "$SD/$1.state"; else echo inactive; fi
}

exec_line() {
	# Strip systemd's prefixes (-, @, +, !, :) from an Exec line.
	l=$1
	while :; do
		case $l in
		-* | @* | +* | !* | :*) l=${l#?} ;;
		*) break ;;
		esac
	done
	echo "$l"
}

gen_start() {
	u=$1
	if masked "$u"; then
		echo "Failed to start $u: Unit $u is masked." >&2
		return 1
	fi
	if ! unit_file "$u" >/dev/null; then
		echo "Failed to start $u: Unit $u not found." >&2
		return 5
	fi
	[ "$(gen_state "$u")" = active ] && return 0
	lf=$(loaded_file "$u")
	if [ "$(need_reload "$u")" = yes ]; then
		echo "Warning: The unit file, source configuration file or drop-ins of $u changed on disk. Run 'systemctl daemon-reload' to reload units." >&2
	fi
	ex=$(exec_line "$(key "$lf" Service ExecStart)")
	if [ -z "$ex" ]; then
		echo "Failed to start $u: Unit $u has no ExecStart= (lab systemctl stand-in)." >&2
		return 1
	fi
	typ=$(key "$lf" Service Type)
	rm -f "$SD/$u.state" "$SD/$u.pid"
	printf '%s lab systemctl: starting %s: %s\n' "$(date -Is)" "$u" "$ex" >>"$SD/$u.log"
	case ${typ:-simple} in
	oneshot)
		if sh -c "exec $ex" </dev/null >>"$SD/$u.log" 2>&1; then
			case $(key "$lf" Service RemainAfterExit) in
			yes | true | on | 1) echo active >"$SD/$u.state" ;;
			esac
			return 0
		fi
		echo failed >"$SD/$u.state"
		echo "Job for $u failed because the control process exited with error code." >&2
		return 1
		;;
	simple | exec | notify | idle)
		setsid sh -c "exec $ex" </dev/null >>"$SD/$u.log" 2>&1 &
		echo "$!" >"$SD/$u.pid"
		;;
	*)
		echo "Failed to start $u: Type=$typ is not supported by the lab systemctl stand-in." >&2
		return 1
		;;
	esac
}

gen_stop() {
	u=$1
	p=
	[ -r "$SD/$u.pid" ] && p=$(cat "$SD/$u.pid")
	if [ -n "$p" ] && alive "$p"; then
		kill -TERM "$p" 2>/dev/null
		end=$(($(now) + STOP_DEADLINE))
		while alive "$p"; do
			if [ "$(now)" -ge "$end" ]; then kill -KILL "$p" 2>/dev/null; fi
			sleep 0.05
		done
	fi
	rm -f "$SD/$u.pid" "$SD/$u.state"
}

gen_reload() {
	u=$1
	lf=$(loaded_file "$u") || { echo "Failed to reload $u: Unit $u not found." >&2; return 5; }
	ex=$(exec_line "$(key "$lf" Service ExecReload)")
	if [ -z "$ex" ]; then
		echo "Failed to reload $u: Job type reload is not applicable for unit $u." >&2
		return 1
	fi
	if [ "$(gen_state "$u")" != active ]; then
		echo "$u is not active, cannot reload." >&2
		return 1
	fi
	MAINPID=$(cat "$SD/$u.pid" 2>/dev/null) sh -c "exec $ex" </dev/null >>"$SD/$u.log" 2>&1
}

# ---------------------------------------------------------------------------------------------------
# both kinds

is_ctrd() { [ "$1" = containerd.service ]; }

# def UNIT: the file that defines the unit ([Install] is read from it), or nothing.
def() {
	if is_ctrd "$1"; then echo /lib/systemd/system/containerd.service; else unit_file "$1"; fi
}

found() { is_ctrd "$1" || unit_file "$1" >/dev/null; }

state_of() { if is_ctrd "$1"; then state; else gen_state "$1"; fi; }

enabled_state() {
	u=$1
	if masked "$u"; then echo masked; return; fi
	found "$u" || return 1
	for l in /etc/systemd/system/*.wants/"$u" /etc/systemd/system/*.requires/"$u"; do
		if [ -L "$l" ]; then echo enabled; return; fi
	done
	f=$(def "$u")
	if [ -n "$(key "$f" Install WantedBy)$(key "$f" Install RequiredBy)$(key "$f" Install Alias)" ]; then
		echo disabled
	else
		echo static
	fi
}

do_enable() {
	u=$1
	if masked "$u"; then
		echo "Failed to enable unit: Unit file /etc/systemd/system/$u is masked." >&2
		return 1
	fi
	f=$(def "$u")
	found "$u" || { echo "Failed to enable unit: Unit file $u does not exist." >&2; return 1; }
	targets=
	for t in $(key "$f" Install WantedBy all); do targets="$targets $t.wants"; done
	for t in $(key "$f" Install RequiredBy all); do targets="$targets $t.requires"; done
	if [ -z "$targets" ]; then
		echo "The unit files have no installation config (WantedBy=, RequiredBy=, Also=, Alias= settings in the [Install] section). This means they are not meant to be enabled using systemctl." >&2
		return 0
	fi
	for t in $targets; do
		if [ ! -L "/etc/systemd/system/$t/$u" ]; then
			mkdir -p "/etc/systemd/system/$t"
			ln -s "$f" "/etc/systemd/system/$t/$u"
			echo "Created symlink /etc/systemd/system/$t/$u → $f." >&2
		fi
	done
}

do_disable() {
	u=$1
	for l in /etc/systemd/system/*.wants/"$u" /etc/systemd/system/*.requires/"$u"; do
		if [ -L "$l" ]; then
			rm -f "$l"
			echo "Removed \"$l\"." >&2
		fi
	done
	return 0
}

show_unit() {
	u=$1
	ls=not-found frag='' ufs='' typ='' pid=0
	if masked "$u"; then
		ls=masked ufs=masked frag=/dev/null
	elif found "$u"; then
		ls=loaded frag=$(def "$u") ufs=$(enabled_state "$u")
		if is_ctrd "$u"; then typ=notify; else typ=$(key "$frag" Service Type); fi
	fi
	s=$(state_of "$u")
	case $s in active) sub=running ;; failed) sub=failed ;; *) sub=dead ;; esac
	if [ "$s" = active ]; then
		if is_ctrd "$u"; then pid=$(mainpid); else pid=$(cat "$SD/$u.pid" 2>/dev/null || echo 0); fi
		if [ ! -e "$SD/$u.pid" ] && ! is_ctrd "$u"; then sub=exited; fi
	fi
	nr=no
	is_ctrd "$u" || nr=$(need_reload "$u")
	{
		echo "Type=${typ:-simple}"
		echo "MainPID=${pid:-0}"
		echo "Id=$u"
		echo "Names=$u"
		echo "LoadState=$ls"
		echo "ActiveState=$s"
		echo "SubState=$sub"
		echo "FragmentPath=$frag"
		echo "UnitFileState=$ufs"
		echo "NeedDaemonReload=$nr"
	} | if [ -n "$props" ]; then
		awk -v want="$props" 'BEGIN { n = split(want, w, ","); for (i = 1; i <= n; i++) if (w[i] != "") keep[w[i]] = 1 }
			{ k = substr($0, 1, index($0, "=") - 1); if (k in keep) print }'
	else
		cat
	fi
}

need_unit() {
	if [ -z "$unit" ]; then
		echo "Too few arguments." >&2
		exit 1
	fi
	unit=$(full "$unit")
}

mkdir -p "$SD"
case $cmd in
daemon-reload | daemon-reexec)
	n=0
	[ -r "$SD/daemon-reloads" ] && n=$(cat "$SD/daemon-reloads")
	echo $((n + 1)) >"$SD/daemon-reloads"
	rm -rf "$SD/loaded"
	mkdir -p "$SD/loaded"
	for d in $UNIT_DIRS; do
		for f in "$d"/*; do
			[ -f "$f" ] && cp -- "$f" "$SD/loaded/${f##*/}"
		done
	done
	exit 0
	;;
start | stop | restart | try-restart | reload | reload-or-restart)
	need_unit
	if is_ctrd "$unit"; then
		case $cmd in
		start) do_start ;;
		stop) do_stop ;;
		restart) do_stop || exit 1; do_start ;;
		try-restart) [ "$(state)" = active ] || exit 0; do_stop || exit 1; do_start ;;
		reload) echo "Failed to reload containerd.service: Job type reload is not applicable for unit containerd.service." >&2; exit 1 ;;
		reload-or-restart) do_stop || exit 1; do_start ;;
		esac
		exit $?
	fi
	case $cmd in
	start) gen_start "$unit" ;;
	stop) gen_stop "$unit" ;;
	restart) gen_stop "$unit" && gen_start "$unit" ;;
	try-restart) [ "$(gen_state "$unit")" = active ] || exit 0; gen_stop "$unit" && gen_start "$unit" ;;
	reload) gen_reload "$unit" ;;
	reload-or-restart) gen_reload "$unit" 2>/dev/null || { gen_stop "$unit" && gen_start "$unit"; } ;;
	esac
	;;
is-active)
	need_unit
	s=$(state_of "$unit")
	[ "$quiet" = 1 ] || echo "$s"
	[ "$s" = active ] || exit 3
	;;
is-failed)
	need_unit
	s=$(state_of "$unit")
	[ "$quiet" = 1 ] || echo "$s"
	[ "$s" = failed ]
	;;
is-enabled)
	need_unit
	if ! e=$(enabled_state "$unit"); then
		[ "$quiet" = 1 ] || echo "Failed to get unit file state for $unit: No such file or directory" >&2
		exit 1
	fi
	[ "$quiet" = 1 ] || echo "$e"
	case $e in enabled | static) exit 0 ;; *) exit 1 ;; esac
	;;
enable)
	need_unit
	do_enable "$unit" || exit 1
	[ "$now" = 0 ] || exec "$0" start "$unit"
	;;
disable)
	need_unit
	do_disable "$unit"
	[ "$now" = 0 ] || exec "$0" stop "$unit"
	;;
mask)
	need_unit
	if ! masked "$unit"; then
		if [ -e "/etc/systemd/system/$unit" ] && [ ! -L "/etc/systemd/system/$unit" ]; then
			echo "Failed to mask unit: File /etc/systemd/system/$unit already exists." >&2
			exit 1
		fi
		ln -sf /dev/null "/etc/systemd/system/$unit"
		echo "Created symlink /etc/systemd/system/$unit → /dev/null." >&2
	fi
	;;
unmask)
	need_unit
	if masked "$unit"; then
		rm -f "/etc/systemd/system/$unit" "/run/systemd/system/$unit"
		echo "Removed \"/etc/systemd/system/$unit\"." >&2
	fi
	;;
show)
	need_unit
	show_unit "$unit"
	;;
list-unit-files)
	need_unit
	if e=$(enabled_state "$unit"); then
		printf 'UNIT FILE STATE VENDOR PRESET\n%s %s enabled\n\n1 unit files listed.\n' "$unit" "$e"
	else
		echo "0 unit files listed."
		exit 1
	fi
	;;
status)
	need_unit
	if ! found "$unit"; then
		echo "Unit $unit could not be found." >&2
		exit 4
	fi
	s=$(state_of "$unit")
	echo "* $unit (nodeconverge lab systemctl stand-in)"
	case $s in
	active) echo "     Active: active (running)" ;;
	failed) echo "     Active: failed (Result: exit-code)" ;;
	*) echo "     Active: inactive (dead)" ;;
	esac
	echo
	if is_ctrd "$unit"; then tail -n 10 "$LOG" 2>/dev/null; else tail -n 10 "$SD/$unit.log" 2>/dev/null; fi
	[ "$s" = active ] || exit 3
	;;
"")
	echo "lab systemctl stand-in: missing command" >&2
	exit 1
	;;
*)
	echo "lab systemctl stand-in: unsupported command $cmd" >&2
	exit 1
	;;
esac
