#!/bin/sh
# The containerd proof with the node's own crictl, for a connection that cannot open the CRI socket
# (modules/containerd/cri, crictl.go): the same steps as the proof over the socket, in one script,
# each step's outcome as an "@" record and its output as "| " lines for crictl.go to read.
#
# Arguments: CRICTL SOCKET TIMEOUT_S RUN IMAGE PULL SWEEP_AGE_S SETTLE_S [HANDLER CONFIG_JSON SYSTEMD_CONFIG_JSON]...
# CONFIG_JSON has a cgroupfs cgroup parent, SYSTEMD_CONFIG_JSON a systemd slice one.
# SWEEP_AGE_S: leftover proof sandboxes of other runs older than this are removed (0: all of them).
# SETTLE_S: after the proof, wait until this many seconds from the start have passed, then check
# that the daemon's socket is the same file (a restarted daemon makes a new one) and still answers.
set -u
crictl=$1 sock=$2 to=$3 run=$4 image=$5 pull=$6 age=$7 settle=$8
shift 8
ep=unix://$sock
start=$(date +%s)

cr() { "$crictl" --runtime-endpoint "$ep" --image-endpoint "$ep" --timeout "${to}s" "$@"; }
rec() { printf '@%s\n' "$*"; }
blob() { printf '%s\n' "$1" | sed 's/^/| /'; }

if ! command -v "$crictl" >/dev/null 2>&1; then
	rec nocrictl
	exit 0
fi
ino0=$(stat -Lc %i "$sock" 2>/dev/null || echo none)
# A CRI service that is still starting says so; it is waited for, within the proof's deadline.
n=0
while :; do
	out=$(cr version 2>&1)
	rc=$?
	[ "$rc" != 0 ] || break
	case $out in *"not initialized yet"*) ;; *) break ;; esac
	n=$((n + 1))
	[ "$n" -lt $((to * 10)) ] || break
	sleep 0.1
done
rec "version $rc"
blob "$out"
out=$(cr info 2>/dev/null)
rc=$?
rec "info $rc"
blob "$out"
[ "$rc" = 0 ] || exit 0

# Leftovers of earlier proofs: id, run label and creation time (ns) per line.
now=$(date +%s)
cr pods --label nodeconverge.io/proof=true -o go-template \
	--template '{{range .items}}{{.id}} {{index .labels "nodeconverge.io/run"}} {{.createdAt}}{{"\n"}}{{end}}' 2>/dev/null |
	while read -r id r created; do
		if [ -z "$id" ] || [ "$r" = "$run" ]; then continue; fi
		secs=${created%?????????}
		[ -n "$secs" ] || secs=0
		if [ "$age" = 0 ] || [ $((now - secs)) -gt "$age" ]; then
			cr stopp "$id" >/dev/null 2>&1
			cr rmp "$id" >/dev/null 2>&1 && rec "swept $id"
		fi
	done

if [ -z "$(cr images -q "$image" 2>/dev/null)" ]; then
	if [ "$pull" = 1 ]; then
		out=$(cr pull "$image" 2>&1)
		rc=$?
		rec "pull $rc"
		blob "$out"
		[ "$rc" = 0 ] || exit 0
	else
		rec noimage
		exit 0
	fi
fi

# Each handler's cgroup driver as the daemon loaded it (SystemdCgroup in its options) picks which
# of its two configs starts the sandbox: a kubelet's cgroup parent has the form of its driver, and
# runc under SystemdCgroup refuses a path that is not a slice. One line per handler: NAME VALUE.
# shellcheck disable=SC2016 # a go template, not shell
drivers=$(cr info -o go-template --template '{{range $n, $r := .config.containerd.runtimes}}{{$n}} {{with $r.options}}{{.SystemdCgroup}}{{end}}{{"\n"}}{{end}}' 2>/dev/null)
while [ $# -ge 3 ]; do
	h=$1 cfg=$2
	sd=$(printf '%s\n' "$drivers" | while read -r n v; do [ "$n" = "$h" ] && printf '%s' "$v"; done)
	[ "$sd" != true ] || cfg=$3
	shift 3
	t0=$(date +%s%N)
	out=$(printf '%s' "$cfg" | cr runp --runtime "$h" /dev/stdin 2>&1)
	rc=$?
	rec "handler $rc $h"
	blob "$out"
	if [ "$rc" = 0 ]; then
		id=$(printf '%s\n' "$out" | tail -n 1)
		rec "state $(cr inspectp -o go-template --template '{{.status.state}}' "$id" 2>/dev/null)"
		cr stopp "$id" >/dev/null 2>&1
		out=$(cr rmp "$id" 2>&1)
		rec "removed $?"
		blob "$out"
	fi
	rec "ms $((($(date +%s%N) - t0) / 1000000))"
done

# Whatever this run's sandboxes left (a failed start can leave a NOTREADY one).
for id in $(cr pods -q --label nodeconverge.io/run="$run" 2>/dev/null); do
	cr stopp "$id" >/dev/null 2>&1
	cr rmp "$id" >/dev/null 2>&1
done

if [ "$settle" -gt 0 ]; then
	left=$((start + settle - $(date +%s)))
	[ "$left" -le 0 ] || sleep "$left"
	ino1=$(stat -Lc %i "$sock" 2>/dev/null || echo none)
	cr version >/dev/null 2>&1
	rec "settle $? $ino0 $ino1 $(($(date +%s) - start))"
fi
rec end
