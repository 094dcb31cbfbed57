#!/bin/sh
# systemctl STAND-IN for the nodeconverge local lab.
#
# systemd cannot run as PID 1 here (the lab nodes are mount namespaces on one machine, not machines),
# so this script plays the part of `systemctl` for the one unit the lab has: containerd. It really
# starts and stops this node's containerd daemon; it does not pretend. Semantics follow systemd where
# callers look at them:
#   start      returns when the daemon answers on /run/containerd/containerd.sock, or exits 1 with the
#              log tail when the process died first (systemd: "Job for containerd.service failed").
#   stop       SIGTERM, wait, SIGKILL after a deadline.
#   restart    stop + start.
#   is-active  prints active|inactive|failed; exit 0 only for active (3 otherwise), `--quiet` honoured.
#   status     a short status block and the log tail; exit 0 active, 3 otherwise.
#   show       MainPID=, ActiveState=, SubState= lines.
#   daemon-reload, enable, disable, is-enabled: accepted, nothing to do.
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

quiet=0
cmd=
unit=
for a in "$@"; do
	case $a in
	-q | --quiet) quiet=1 ;;
	--no-pager | --no-block | --now | --no-ask-password | --system | -l | --full) ;;
	-p | --property=* | -*) ;;
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

do_start() {
	p=$(mainpid)
	if alive "$p"; then return 0; fi
	bin=containerd
	if [ -r "$BINFILE" ]; then bin=$(cat "$BINFILE"); fi
	printf '%s lab systemctl: starting %s --config /etc/containerd/config.toml\n' "$(date -Is)" "$bin" >>"$LOG"
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
		if booted && ping_daemon; then return 0; fi
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
	printf '%s lab systemctl: stopping containerd (pid %s)\n' "$(date -Is)" "$p" >>"$LOG"
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

check_unit() {
	case $unit in
	containerd | containerd.service) return 0 ;;
	"")
		echo "Too few arguments." >&2
		exit 1
		;;
	*)
		echo "Unit $unit could not be found (lab systemctl stand-in knows only containerd)." >&2
		exit 5
		;;
	esac
}

case $cmd in
daemon-reload) exit 0 ;;
start)
	check_unit
	do_start
	;;
stop)
	check_unit
	do_stop
	;;
restart)
	check_unit
	do_stop || exit 1
	do_start
	;;
is-active)
	check_unit
	s=$(state)
	[ "$quiet" = 1 ] || echo "$s"
	[ "$s" = active ] || exit 3
	;;
is-failed)
	check_unit
	s=$(state)
	[ "$quiet" = 1 ] || echo "$s"
	[ "$s" = failed ]
	;;
is-enabled)
	check_unit
	[ "$quiet" = 1 ] || echo enabled
	;;
enable | disable) check_unit ;;
show)
	check_unit
	s=$(state)
	p=$(mainpid)
	case $s in active) sub=running ;; failed) sub=failed ;; *) sub=dead ;; esac
	[ "$s" = active ] || p=0
	echo "MainPID=${p:-0}"
	echo "ActiveState=$s"
	echo "SubState=$sub"
	;;
status)
	check_unit
	s=$(state)
	p=$(mainpid)
	echo "* containerd.service - containerd container runtime (nodeconverge lab stand-in)"
	case $s in
	active) echo "     Active: active (running)" && echo "   Main PID: $p" ;;
	failed) echo "     Active: failed (Result: exit-code)" ;;
	*) echo "     Active: inactive (dead)" ;;
	esac
	echo
	tail -n 10 "$LOG" 2>/dev/null
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
