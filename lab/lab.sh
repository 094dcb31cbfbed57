#!/usr/bin/env bash
# lab.sh — the nodeconverge local lab: N "nodes" on one machine, each an sshd on its own loopback
# address inside its own mount namespace, with per-node /etc/containerd, /etc/sysctl.d, /run/containerd,
# /var/lib/containerd, /root, inotify sysctl files, and a real containerd daemon driven by a systemctl
# stand-in. See lab/README.md for what is real and what is a stand-in.
#
# Usage (as root):
#   lab.sh up --dir DIR --nodes N [--net 127.30.0] [--port 2222] [--names a,b,c] [--no-containerd]
#             [--containerd-bin PATH] [--scenario incident|clean|none]
#   lab.sh down --dir DIR [--purge]
#   lab.sh exec --dir DIR NAME -- CMD...
#   lab.sh stop-sshd --dir DIR NAME
#   lab.sh start-sshd --dir DIR NAME
#   lab.sh import-image --dir DIR NAME
#   lab.sh status --dir DIR
set -euo pipefail

# Every inherited descriptor above stderr is closed: a node's processes (holder, sshd, containerd)
# outlive this script, and one that holds a caller's descriptor (the lock of a `flock ... make test`)
# would hold it for the lab's life.
for fd in "/proc/$$/fd"/*; do
	fd=${fd##*/}
	if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
done
LAB_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NODE_PATH_ENV=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Debian's runc (lab/deps.sh), the real runc behind every node's runc stand-in.
REAL_RUNC=/usr/sbin/runc
# Host paths each node gets its own copy of (bind-mounted from DIR/nodes/NAME/<same path>).
# /run/nri: containerd 2.x's NRI socket; without it two 2.x nodes collide on one socket.
MOUNTED_DIRS=(/etc/containerd /etc/sysctl.d /etc/cni/net.d /run/containerd /run/nri /var/lib/containerd
	/var/lib/nodeconverge /root /usr/local/sbin /usr/local/nvidia)
# What node-prep roles write (kernel modules, units) and what the modprobe and systemctl stand-ins keep:
# /run/systemd is mounted whole, with the node's /run/systemd/system in it: that directory is systemd's
# "booted" canary (Ansible's service module drives systemctl when it is there), and creating it on the
# host itself would tell the host's own package scripts that systemd runs there.
MOUNTED_DIRS+=(/etc/modules-load.d /etc/modprobe.d /etc/systemd/system /run/systemd /lib/modules)
PROC_FILES=(/proc/sys/fs/inotify/max_user_instances /proc/sys/fs/inotify/max_user_watches)
# The node's loaded kernel modules are the modprobe stand-in's list, DIR/nodes/NAME/proc/modules (see
# lab/modprobe.sh); on a kernel with loadable modules it is bind-mounted over /proc/modules too. A kernel
# without them has no /proc/modules to mount over: there the node's Python reads the list at that path
# through a stand-in usercustomize (lab/usercustomize.py), for Ansible's modprobe module.
if [[ -e /proc/modules ]]; then PROC_FILES+=(/proc/modules); fi
# PID 1's name, as the node's processes read it: "systemd" (DIR/nodes/NAME/proc/1/comm), so a node looks
# booted by systemd to what asks (Ansible's service_mgr fact), as the systemctl stand-in and the
# /run/systemd/system canary say it is.
PROC_FILES+=(/proc/1/comm)
# The host's own copies of the tools the lab stands in for (systemd's systemctl, kmod's modprobe and
# lsmod) are covered in each node by the node's stand-in, so every path to them reaches the stand-in
# (Ansible's service module looks in /usr/bin before PATH).
STANDIN_TOOLS=(systemctl modprobe lsmod)
# Startup waits poll against these deadlines (seconds).
SSHD_DEADLINE=${LAB_SSHD_DEADLINE:-180}
PARALLEL=${LAB_PARALLEL:-16}

die() {
	echo "lab.sh: $*" >&2
	exit 1
}
log() { echo "lab.sh: $*" >&2; }

usage() {
	sed -n '7,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# ---------------------------------------------------------------------------------------------------
# helpers

# alive PID: a live, non-zombie process (the machine's PID 1 may not reap orphans).
alive() {
	local p=$1 st
	[[ -n $p && -r /proc/$p/stat ]] || return 1
	# read, not $(<...): no fork per check (down polls thousands of pids).
	read -r st 2>/dev/null <"/proc/$p/stat" || return 1
	st=${st##*) }
	st=${st%% *}
	[[ -n $st && $st != Z && $st != X ]]
}

mntns_of() { readlink "/proc/$1/ns/mnt" 2>/dev/null || true; }

load_env() {
	[[ -r $DIR/lab.env ]] || die "$DIR/lab.env not found: no lab in $DIR"
	# shellcheck disable=SC1091
	source "$DIR/lab.env"
}

node_dir() { echo "$DIR/nodes/$1"; }

# holder_pid NAME: pid of the process that anchors the node's mount namespace, or empty.
holder_pid() {
	local nd p
	nd=$(node_dir "$1")
	[[ -r $nd/holder.pid ]] || return 0
	p=$(<"$nd/holder.pid")
	if alive "$p" && [[ $(mntns_of "$p") == "$(<"$nd/mntns")" ]]; then echo "$p"; fi
}

require_holder() {
	local p
	p=$(holder_pid "$1")
	[[ -n $p ]] || die "node $1 is not running (no live namespace holder in $(node_dir "$1"))"
	echo "$p"
}

# addr_for I: set ADDR to the I-th node address (1-based): NET.(I+10), carrying into the third octet
# past .254 so that 500 nodes fit. Sets a variable instead of printing: no subshell per call.
addr_for() {
	local i=$1 a b c n
	IFS=. read -r a b c <<<"$NET"
	n=$((i + 10))
	while ((n > 254)); do
		n=$((n - 254))
		c=$((c + 1))
	done
	((c <= 255)) || die "--net $NET has no room for $NODES nodes"
	ADDR=$a.$b.$c.$n
}

ensure_packages() {
	local missing=()
	[[ -x /usr/sbin/sshd ]] || missing+=(openssh-server)
	command -v containerd >/dev/null || missing+=(containerd)
	command -v nsenter >/dev/null || missing+=(util-linux)
	if ((${#missing[@]})); then
		log "installing ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
}

# ---------------------------------------------------------------------------------------------------
# up

# build_standins: the runc stand-in and the sandbox image (lab/build-standins.sh, cached in the
# repository's bin/, or LAB_STANDIN_DIR).
build_standins() {
	STANDIN_DIR=${LAB_STANDIN_DIR:-$LAB_SRC/../bin}
	"$LAB_SRC/build-standins.sh" "$STANDIN_DIR" || die "building the lab's stand-ins failed"
	STANDIN_DIR=$(cd "$STANDIN_DIR" && pwd)
}

write_scenario() {
	local name=$1 nd=$2 s=$LAB_SRC/scenarios
	case $SCENARIO in
	incident)
		mkdir -p "$nd/etc/containerd/conf.d"
		cp "$s/incident/config.toml" "$nd/etc/containerd/config.toml"
		cp "$s/incident/99-nvidia.toml" "$nd/etc/containerd/conf.d/99-nvidia.toml"
		cp "$s/incident/zz-labhub-registry.toml" "$nd/etc/containerd/conf.d/zz-labhub-registry.toml"
		if [[ $name == omen ]]; then
			# The first wrong turn: the nvidia block appended with >>, pasted twice.
			cat "$s/incident/omen-nvidia-append.toml" "$s/incident/omen-nvidia-append.toml" \
				>>"$nd/etc/containerd/config.toml"
		fi
		;;
	clean)
		cp "$s/clean/config.toml" "$nd/etc/containerd/config.toml"
		;;
	none) ;;
	*) die "unknown scenario $SCENARIO" ;;
	esac
}

# nvidia_standin NAME: the STAND-IN for one of the toolkit's runtimes (no GPU here). Like the real
# one it ends in runc (the node's runc stand-in, first on PATH); it logs each call, one line with its
# name and arguments, to /usr/local/nvidia/toolkit/invocations.log, so a test sees that containerd
# really ran a container through that handler.
nvidia_standin() {
	printf '#!/bin/sh\n# lab STAND-IN for %s (no GPU here): logs the call, then behaves as plain runc.\n' "$1"
	# shellcheck disable=SC2016
	printf '%s\n' 'printf '\''%s %s\n'\'' "${0##*/}" "$*" >>/usr/local/nvidia/toolkit/invocations.log' 'exec runc "$@"'
}

# runc_standin NAME NODE_DIR: /usr/local/sbin/runc of a node, the runc STAND-IN: lab-runc
# (lab/standins/labrunc) turns systemd cgroups into cgroupfs ones under this node's own subtree and
# copes with the missing CAP_SYS_RESOURCE, then execs the real runc: Debian's $REAL_RUNC, which the
# node's init bind-mounts at NODE_DIR/real-runc (a node may have the stand-in at /usr/sbin/runc as
# well, for a config naming that path, so the stand-in is not told to run /usr/sbin/runc). It logs
# each call to NODE_DIR/runc.log.
runc_standin() {
	printf '#!/bin/sh\n# lab STAND-IN for runc (see lab/standins/labrunc and lab/README.md).\n'
	# shellcheck disable=SC2016
	printf 'exec %s -lab-cgroup=%s -lab-log=%s -lab-real-runc=%s -- "$@"\n' "'$STANDIN_DIR/lab-runc'" "'$(cgroup_key "$1")'" "'$2/runc.log'" "'$2/real-runc'"
}

# cgroup_key NAME: the cgroupfs subtree (below each controller's mount) that a node's containers run
# in; lab-runc puts them there, and `down` ends what is left in it.
cgroup_key() { echo "/nodeconverge-lab/$(basename "$DIR")/$1"; }

# import_image_in NAME: the lab's sandbox image into the node's containerd (namespace k8s.io, where
# the CRI plugin looks), from the OCI archive build-standins.sh made: the lab has no registry, and
# nothing in the lab ever pulls. Idempotent (the same digests each time).
import_image_in() {
	nsenter -m -t "$(holder_pid "$1")" --wd=/ -- env -i PATH="$NODE_PATH_ENV" \
		ctr --address /run/containerd/containerd.sock -n k8s.io images import "$STANDIN_DIR/lab-sandbox-image.tar" \
		>"$(node_dir "$1")/import.out" 2>&1 && : >"$(node_dir "$1")/sandbox-image.imported"
}

# import_image_offline NAME: the sandbox image into a node whose containerd refuses its config
# (omen in the incident): a containerd of the node's binary on a minimal config with the node's own
# root (/var/lib/containerd, where images live) and a socket of its own serves the import, then
# stops. The node's daemon finds the image there once a run repairs its config.
import_image_offline() {
	local nd bin
	nd=$(node_dir "$1")
	bin=$(<"$nd/containerd-bin")
	printf 'version = 2
root = "/var/lib/containerd"
state = "/run/containerd/lab-import"
[grpc]
  address = "/run/containerd/lab-import.sock"
' >"$nd/import-config.toml"
	# shellcheck disable=SC2016 # the script expands its own arguments, in the node
	nsenter -m -t "$(holder_pid "$1")" --wd=/ -- env -i PATH="$NODE_PATH_ENV" sh -c '
		"$1" --config "$2" >"$3/import-daemon.log" 2>&1 &
		pid=$!
		i=0
		until ctr --address /run/containerd/lab-import.sock version >/dev/null 2>&1; do
			i=$((i + 1))
			if [ "$i" -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
				echo "import daemon did not answer" >&2
				kill -KILL "$pid" 2>/dev/null
				exit 1
			fi
			sleep 0.1
		done
		ctr --address /run/containerd/lab-import.sock -n k8s.io images import "$4"
		rc=$?
		kill -TERM "$pid"
		wait "$pid"
		rm -rf /run/containerd/lab-import /run/containerd/lab-import.sock
		exit "$rc"' import "$bin" "$nd/import-config.toml" "$nd" "$STANDIN_DIR/lab-sandbox-image.tar" \
		>"$nd/import.out" 2>&1
}

# setup_node I NAME: everything on disk for one node, then start its namespace holder and sshd.
setup_node() {
	local i=$1 name=$2 addr nd f systemctl_src
	addr_for "$i"
	addr=$ADDR
	nd=$(node_dir "$name")
	# One mkdir/chmod/cp per node, not one per path: at 500 nodes the forks are the cost.
	mkdir -p "${MOUNTED_DIRS[@]/#/$nd}" "$nd/proc/sys/fs/inotify" "$nd/proc/1" "$nd/root/.ssh" "$nd/usr/local/nvidia/toolkit" \
		"$nd/lib/modules/$KERNEL_RELEASE" "$nd/etc/systemd/system/multi-user.target.wants" "$nd/run/systemd/system"
	cp "$DIR/id_ed25519.pub" "$nd/root/.ssh/authorized_keys"
	# Kernel defaults of a fresh node (the incident's nodes had 128 instances).
	echo 128 >"$nd/proc/sys/fs/inotify/max_user_instances"
	echo "$INOTIFY_WATCHES_DEFAULT" >"$nd/proc/sys/fs/inotify/max_user_watches"
	systemctl_src=${SYSTEMCTL_SRC//@NODE@/$nd}
	# The image's path goes inside single quotes in the stand-in: the repository's path may hold a
	# space (or a quote), and it is data there, not shell syntax.
	image=$STANDIN_DIR/lab-sandbox-image.tar
	image=${image//\'/\'\\\'\'}
	echo "${systemctl_src//@IMAGE@/"$image"}" >"$nd/usr/local/sbin/systemctl"
	echo "${MODPROBE_SRC//@NODE@/$nd}" >"$nd/usr/local/sbin/modprobe"
	echo "${LSMOD_SRC//@NODE@/$nd}" >"$nd/usr/local/sbin/lsmod"
	if [[ ! -e /proc/modules && -n $PY_USER_SITE ]]; then
		mkdir -p "$nd$PY_USER_SITE"
		echo "${USERCUSTOMIZE_SRC//@NODE@/$nd}" >"$nd$PY_USER_SITE/usercustomize.py"
	fi
	# A fresh node's kernel modules (modprobe stand-in): what is available, built in, and loaded.
	printf '%s' "$MODULES_DEP" >"$nd/lib/modules/$KERNEL_RELEASE/modules.dep"
	printf '%s' "$MODULES_BUILTIN" >"$nd/lib/modules/$KERNEL_RELEASE/modules.builtin"
	printf '%s' "$MODULES_LOADED" >"$nd/proc/modules"
	echo systemd >"$nd/proc/1/comm"
	# containerd is enabled, as Debian's package leaves it (the systemctl stand-in reads the link).
	ln -sfn /lib/systemd/system/containerd.service "$nd/etc/systemd/system/multi-user.target.wants/containerd.service"
	echo "${JOURNALCTL_SRC//@NODE@/$nd}" >"$nd/usr/local/sbin/journalctl"
	for f in nvidia-container-runtime nvidia-container-runtime.cdi nvidia-container-runtime.legacy; do
		nvidia_standin "$f" >"$nd/usr/local/nvidia/toolkit/$f"
	done
	runc_standin "$name" "$nd" >"$nd/usr/local/sbin/runc"
	# The mount point of the real runc the stand-in runs (see init.sh below): empty outside the node.
	: >"$nd/real-runc"
	chmod 700 "$nd/root" "$nd/root/.ssh"
	chmod 600 "$nd/root/.ssh/authorized_keys"
	chmod 755 "$nd/usr/local/sbin/systemctl" "$nd/usr/local/sbin/journalctl" "$nd/usr/local/sbin/modprobe" "$nd/usr/local/sbin/lsmod" "$nd/usr/local/sbin/runc" "$nd"/usr/local/nvidia/toolkit/*
	echo "$CONTAINERD_BIN" >"$nd/containerd-bin"
	# A node built with another containerd (a 2.x build) has it first on
	# PATH, as a real 2.x node would: modules ask the node's own binary.
	rm -f "$nd/usr/local/sbin/containerd"
	if [[ $CONTAINERD_BIN != "$(command -v containerd)" ]]; then
		ln -s "$CONTAINERD_BIN" "$nd/usr/local/sbin/containerd"
	fi
	write_scenario "$name" "$nd"
	[[ -e $nd/ssh_host_ed25519_key ]] ||
		ssh-keygen -q -t ed25519 -N '' -C "lab-$name" -f "$nd/ssh_host_ed25519_key" </dev/null
	cat >"$nd/sshd_config" <<EOF
# sshd for lab node $name (nodeconverge lab)
ListenAddress $addr:$PORT
HostKey $nd/ssh_host_ed25519_key
PidFile $nd/sshd.pid
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile /root/.ssh/authorized_keys
StrictModes no
AllowTcpForwarding yes
MaxSessions 50
MaxStartups 200:30:500
LogLevel VERBOSE
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
SetEnv PATH=$NODE_PATH_ENV
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
	printf 'NAME=%s\nADDR=%s\nPORT=%s\n' "$name" "$addr" "$PORT" >"$nd/node.env"

	# The node's init: bind mounts, sshd, then "ready" (its pid in holder.pid), then sleep forever so
	# the namespace outlives sshd restarts. Runs in a private mount namespace: nothing leaks to the host.
	{
		echo 'set -e'
		for d in "${MOUNTED_DIRS[@]}"; do echo "mount --bind '$nd$d' '$d'"; done
		for f in "${PROC_FILES[@]}"; do echo "mount --bind '$nd$f' '$f'"; done
		# Debian's runc where the node's runc stand-in runs it: bound before anything can put the
		# stand-in at /usr/sbin/runc in this namespace, so it is always the machine's real runc.
		echo "mount --bind '$REAL_RUNC' '$nd/real-runc'"
		for t in "${STANDIN_TOOLS[@]}"; do
			for d in /usr/bin /usr/sbin /bin /sbin; do
				# /bin is /usr/bin on a merged-/usr host: one mount each real file.
				if [[ -f $d/$t && ! -L $d && ! -L $d/$t ]]; then echo "mount --bind '$nd/usr/local/sbin/$t' '$d/$t'"; fi
			done
		done
		echo "readlink /proc/\$\$/ns/mnt > '$nd/mntns'"
		# sshd starts here rather than through nsenter afterwards: one process less per node, and the
		# subshell hands sshd to PID 1 so it is not left a zombie under `sleep` when stopped.
		echo "(setsid env -i PATH='$NODE_PATH_ENV' /usr/sbin/sshd -D -f '$nd/sshd_config' -E '$nd/sshd.log' </dev/null >>'$nd/sshd.out' 2>&1 &)"
		echo "echo \$\$ > '$nd/holder.pid.tmp' && mv '$nd/holder.pid.tmp' '$nd/holder.pid'"
		echo 'exec sleep infinity'
	} >"$nd/init.sh"
	rm -f "$nd/holder.pid"
	# The subshell detaches the node from our job table, so `wait` never waits for a node.
	(setsid unshare --mount --propagation private -- /bin/sh "$nd/init.sh" \
		</dev/null >>"$nd/init.log" 2>&1 &)
}

# start_containerd_in NAME: the node's containerd through its systemctl stand-in; output in start.out.
# The stand-in's own start deadline (120 s, like a unit's start timeout) is for one restart; a lab
# starting a thousand daemons at once on a loaded machine waits longer for each (LAB_UP_START_TIMEOUT,
# 900 s by default): slow is not failed, and the deadline still bounds a daemon that never answers.
start_containerd_in() {
	nsenter -m -t "$(holder_pid "$1")" --wd=/ -- env -i PATH="$NODE_PATH_ENV" \
		LAB_CONTAINERD_START_TIMEOUT="${LAB_UP_START_TIMEOUT:-900}" \
		systemctl start containerd >"$(node_dir "$1")/start.out" 2>&1
}

start_sshd_in() {
	local name=$1 hp nd
	nd=$(node_dir "$name")
	hp=$(require_holder "$name")
	rm -f "$nd/sshd.pid"
	(setsid nsenter -m -t "$hp" --wd=/ -- env -i PATH="$NODE_PATH_ENV" \
		/usr/sbin/sshd -D -f "$nd/sshd_config" -E "$nd/sshd.log" </dev/null >>"$nd/sshd.out" 2>&1 &)
}

# wait_listening ADDR:PORT...: poll `ss` until every address listens or the deadline passes. One `ss`
# per round and no fork per address, so 500 pending nodes cost the same as one.
wait_listening() {
	local end=$((SECONDS + SSHD_DEADLINE)) pending=("$@") next a
	local -A listening
	while ((${#pending[@]})); do
		listening=()
		while read -r _ _ _ a _; do listening[$a]=1; done < <(ss -Hltn "sport = :$PORT")
		next=()
		for a in "${pending[@]}"; do
			[[ -n ${listening[$a]:-} ]] || next+=("$a")
		done
		pending=("${next[@]+"${next[@]}"}")
		((${#pending[@]})) || break
		((SECONDS < end)) || die "sshd not listening after ${SSHD_DEADLINE}s on: ${pending[*]}"
		sleep 0.05
	done
}

wait_holders() {
	local end=$((SECONDS + SSHD_DEADLINE)) name nd
	for name in "$@"; do
		nd=$(node_dir "$name")
		until [[ -s $nd/holder.pid ]]; do
			((SECONDS < end)) || die "node $name: namespace not ready; $(tail -5 "$nd/init.log" 2>/dev/null)"
			sleep 0.02
		done
	done
}

# Background jobs, at most PARALLEL at once. Every job is reaped exactly once, here, with its
# status: a plain `wait -n` to throttle and a later `wait PID` for the status would reap some jobs
# twice, and bash answers the second wait with "pid N is not a child of this shell".
declare -A BG_LABEL=()
BG_FAILED=()

# bg_reap: wait for one of our jobs to end; record its label in BG_FAILED if it failed.
bg_reap() {
	local pid="" rc=0
	wait -n -p pid "${!BG_LABEL[@]}" || rc=$?
	[[ -n $pid ]] || die "internal: wait -n returned no job (rc $rc) with ${#BG_LABEL[@]} running"
	((rc == 0)) || BG_FAILED+=("${BG_LABEL[$pid]}")
	unset "BG_LABEL[$pid]"
}

# bg LABEL CMD...: run CMD in the background once fewer than PARALLEL jobs run.
bg() {
	local label=$1
	shift
	while ((${#BG_LABEL[@]} >= PARALLEL)); do bg_reap; done
	"$@" &
	BG_LABEL[$!]=$label
}

# bg_wait: reap every job; BG_FAILED then lists the labels of those that failed.
bg_wait() {
	while ((${#BG_LABEL[@]})); do bg_reap; done
}

cmd_up() {
	local nodes="" names="" no_ctrd=0 i name
	NET=127.30.0 PORT=2222 SCENARIO="" CONTAINERD_BIN=""
	while (($#)); do
		case $1 in
		--dir) DIR=$2; shift ;;
		--nodes) nodes=$2; shift ;;
		--net) NET=$2; shift ;;
		--port) PORT=$2; shift ;;
		--names) names=$2; shift ;;
		--no-containerd) no_ctrd=1 ;;
		--containerd-bin) CONTAINERD_BIN=$2; shift ;;
		--scenario) SCENARIO=$2; shift ;;
		*) die "up: unknown argument $1" ;;
		esac
		shift
	done
	[[ -n ${DIR:-} ]] || die "up: --dir is required"
	[[ $NET =~ ^127\.[0-9]+\.[0-9]+$ ]] || die "up: --net must be three octets in 127/8, e.g. 127.30.0"
	((EUID == 0)) || die "up: must run as root (mount namespaces, sshd)"
	local -a NAMES
	if [[ -n $names ]]; then
		IFS=, read -r -a NAMES <<<"$names"
		[[ -z $nodes || $nodes == "${#NAMES[@]}" ]] || die "up: --nodes $nodes but ${#NAMES[@]} names"
	else
		[[ $nodes =~ ^[0-9]+$ && $nodes -ge 1 ]] || die "up: --nodes N (N>=1) or --names is required"
		if ((nodes == 4)); then
			NAMES=(nuc1 nuc2 omen omen2)
		else
			local width=${#nodes}
			((width >= 2)) || width=2
			for ((i = 1; i <= nodes; i++)); do printf -v name 'node%0*d' "$width" "$i" && NAMES+=("$name"); done
		fi
	fi
	NODES=${#NAMES[@]}
	if [[ -z $SCENARIO ]]; then
		if [[ ${NAMES[*]} == "nuc1 nuc2 omen omen2" ]]; then SCENARIO=incident; else SCENARIO=clean; fi
	fi
	ensure_packages
	if [[ -z $CONTAINERD_BIN ]]; then CONTAINERD_BIN=$(command -v containerd); fi
	[[ -x $CONTAINERD_BIN ]] || die "up: containerd binary $CONTAINERD_BIN is not executable"
	build_standins
	SYSTEMCTL_SRC=$(<"$LAB_SRC/systemctl.sh")
	MODPROBE_SRC=$(<"$LAB_SRC/modprobe.sh")
	LSMOD_SRC=$(<"$LAB_SRC/lsmod.sh")
	USERCUSTOMIZE_SRC=$(<"$LAB_SRC/usercustomize.py")
	# Where root's Python on a node looks for usercustomize (root's HOME is the node's own /root).
	PY_USER_SITE=$(HOME=/root /usr/bin/python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null || true)
	KERNEL_RELEASE=$(uname -r)
	MODULES_DEP=$(<"$LAB_SRC/modules/modules.dep")$'\n'
	MODULES_BUILTIN=$(<"$LAB_SRC/modules/modules.builtin")$'\n'
	MODULES_LOADED=$(<"$LAB_SRC/modules/loaded")$'\n'
	JOURNALCTL_SRC=$(<"$LAB_SRC/journalctl.sh")
	INOTIFY_WATCHES_DEFAULT=${LAB_INOTIFY_WATCHES:-$(cat /proc/sys/fs/inotify/max_user_watches)}

	mkdir -p "$DIR/nodes"
	DIR=$(cd "$DIR" && pwd)
	if [[ -r $DIR/lab.env ]]; then
		load_env
		for name in $LAB_NODES; do
			[[ -z $(holder_pid "$name") ]] || die "up: a lab is already running in $DIR (lab.sh down first)"
		done
	fi
	# Mount targets that the host lacks. Empty directories; creating them is the lab's only change
	# to the host outside DIR (plus /run/sshd, sshd's privilege-separation directory).
	local d
	for d in "${MOUNTED_DIRS[@]}"; do mkdir -p "$d"; done
	mkdir -p /run/sshd
	chmod 755 /run/sshd
	[[ -e $DIR/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C nodeconverge-lab -f "$DIR/id_ed25519" </dev/null

	local t0=$SECONDS
	for ((i = 1; i <= NODES; i++)); do
		bg "${NAMES[i - 1]}" setup_node "$i" "${NAMES[i - 1]}"
	done
	bg_wait
	((${#BG_FAILED[@]} == 0)) || die "node setup failed: ${BG_FAILED[*]}"
	wait_holders "${NAMES[@]}"
	local addrs=()
	for ((i = 1; i <= NODES; i++)); do
		addr_for "$i"
		addrs+=("$ADDR:$PORT")
	done
	wait_listening "${addrs[@]}"
	write_outputs
	log "$NODES nodes listening on $NET.x:$PORT after $((SECONDS - t0))s"

	# Scenario none writes no config.toml; containerd would refuse to start without it.
	if ((no_ctrd == 0)) && [[ $SCENARIO != none ]]; then
		for name in "${NAMES[@]}"; do
			bg "$name" start_containerd_in "$name"
		done
		bg_wait
		local -A down=()
		for name in "${BG_FAILED[@]+"${BG_FAILED[@]}"}"; do
			if [[ $SCENARIO == incident && $name == omen ]]; then
				log "node omen: containerd refused its config, as in the incident: $(grep -m1 -o 'failed to load TOML[^"]*' "$(node_dir omen)/containerd.log" || true)"
				down[$name]=1
			else
				cat "$(node_dir "$name")/start.out" >&2
				die "node $name: containerd did not start"
			fi
		done
		log "containerd started after $((SECONDS - t0))s"
		BG_FAILED=()
		# omen's daemon refuses its config: its image goes in through a daemon of its own (its
		# /var/lib/containerd keeps the import for when a run repairs the config).
		for name in "${NAMES[@]}"; do
			if [[ -n ${down[$name]:-} ]]; then
				bg "$name" import_image_offline "$name"
			else
				bg "$name" import_image_in "$name"
			fi
		done
		bg_wait
		for name in "${BG_FAILED[@]+"${BG_FAILED[@]}"}"; do
			cat "$(node_dir "$name")/import.out" >&2
			die "node $name: importing the sandbox image failed"
		done
		log "sandbox image imported after $((SECONDS - t0))s"
	fi
	echo "$DIR"
}

# write_outputs: inventory, known_hosts, lab.env. No fork per node (builtins only): on a loaded
# machine a fork costs a run-queue wait, and 1000 nodes took minutes with two per node.
write_outputs() {
	local i name addr nd kt kk hk="$DIR/known_hosts.tmp" inv="$DIR/inventory.yaml.tmp" node_addrs=""
	{
		echo "# nodeconverge lab inventory (generated by lab/lab.sh)"
		echo "all:"
		echo "  children:"
		echo "    gpu:"
		echo "      vars:"
		echo "        ansible_ssh_common_args: \"-o UserKnownHostsFile=$DIR/known_hosts -o StrictHostKeyChecking=yes\""
		echo "      hosts:"
		for ((i = 1; i <= NODES; i++)); do
			name=${NAMES[i - 1]}
			addr_for "$i"
			printf '        %s:\n          ansible_host: %s\n          ansible_port: %s\n          ansible_user: root\n          ansible_ssh_private_key_file: %s\n' \
				"$name" "$ADDR" "$PORT" "$DIR/id_ed25519"
		done
	} >"$inv"
	for ((i = 1; i <= NODES; i++)); do
		name=${NAMES[i - 1]}
		addr_for "$i"
		addr=$ADDR
		nd=$DIR/nodes/$name
		read -r kt kk _ <"$nd/ssh_host_ed25519_key.pub"
		if [[ $PORT == 22 ]]; then echo "$addr $kt $kk"; else echo "[$addr]:$PORT $kt $kk"; fi
		node_addrs+="$name=$addr "
	done >"$hk"
	mv "$hk" "$DIR/known_hosts"
	mv "$inv" "$DIR/inventory.yaml"
	cat >"$DIR/lab.env.tmp" <<EOF
# nodeconverge lab (generated by lab/lab.sh); shell-sourceable.
LAB_DIR='$DIR'
LAB_PORT='$PORT'
LAB_NET='$NET'
LAB_SCENARIO='$SCENARIO'
LAB_KEY='$DIR/id_ed25519'
LAB_INVENTORY='$DIR/inventory.yaml'
LAB_KNOWN_HOSTS='$DIR/known_hosts'
LAB_NODES='${NAMES[*]}'
LAB_NODE_ADDRS='${node_addrs% }'
EOF
	mv "$DIR/lab.env.tmp" "$DIR/lab.env"
}

# ---------------------------------------------------------------------------------------------------
# down

# lab_namespaces: the mount namespaces of this lab's nodes, one per line (from live holders, or the
# recorded ids when a holder is gone but other processes may still hold the namespace).
lab_namespaces() {
	local nd ns
	# read, not cat: a fork per node took minutes at 1000 nodes on a loaded machine.
	for nd in "$DIR"/nodes/*/; do
		[[ -r $nd/mntns ]] && read -r ns <"$nd/mntns" && echo "$ns"
	done
	return 0
}

# proc_namespaces: "/proc/PID/ns MNTNS" for every process. find exits non-zero when processes vanish
# during the walk, which is normal here and must not abort the script under pipefail.
proc_namespaces() {
	# The glob names each process's ns/mnt link; find only reads those links. A walk of /proc to depth 3
	# lists every process's fd/, task/ and net/ entries too: over a minute with 3000 processes.
	local links=(/proc/[0-9]*/ns/mnt)
	find "${links[@]}" -maxdepth 0 -printf '%h %l\n' 2>/dev/null || true
}

# pids_in_namespaces NSFILE: pids whose mount namespace is listed in NSFILE (never our own namespace)
# and that really are this lab's: a namespace's id is an inode number the kernel reuses once the
# namespace is gone, so a stale NSFILE (a lab already down, a crashed node) would name some other
# program's namespace. A process of this lab sees the node directories mounted (its mountinfo names
# <lab dir name>/nodes/; the name, not the full path, since mountinfo shows paths relative to the
# filesystem the lab dir is on); anything else is left alone.
pids_in_namespaces() {
	local self mark
	self=$(readlink /proc/self/ns/mnt)
	mark="/$(basename "$DIR")/nodes/"
	# One awk reads every candidate's mountinfo: a grep per process was one fork per process, and
	# at 1000 nodes (3000 processes) on a loaded machine that loop alone took over 15 minutes.
	proc_namespaces |
		awk -v self="$self" -v mark="$mark" '
			NR == FNR { ns[$1] = 1; next }
			$2 != self && ($2 in ns) {
				split($1, p, "/"); f = "/proc/" p[3] "/mountinfo"
				while ((getline line < f) > 0) if (index(line, mark)) { print p[3]; break }
				close(f)
			}' "$1" -
	return 0
}

# wait_dead DEADLINE PID...: poll until no PID is alive; false if the deadline passed first. A process
# leaves its namespace before it is reaped, so liveness, not namespace membership, is what is polled.
wait_dead() {
	local end=$((SECONDS + $1)) p any
	shift
	while :; do
		any=0
		for p in "$@"; do
			if alive "$p"; then any=1 && break; fi
		done
		((any)) || return 0
		((SECONDS < end)) || return 1
		sleep 0.05
	done
}

# kill_namespaces NSFILE: TERM every process in the listed namespaces, KILL what outlives the
# deadline, and repeat while new processes show up (sshd children forked during shutdown).
kill_namespaces() {
	local nsfile=$1 pids
	for _ in 1 2 3 4 5; do
		pids=$(pids_in_namespaces "$nsfile")
		[[ -n $pids ]] || return 0
		# shellcheck disable=SC2086
		kill -TERM $pids 2>/dev/null || true
		# shellcheck disable=SC2086
		if ! wait_dead 10 $pids; then
			# shellcheck disable=SC2086
			kill -KILL $pids 2>/dev/null || true
			# shellcheck disable=SC2086
			wait_dead 5 $pids || die "processes survived SIGKILL: $pids"
		fi
	done
	pids=$(pids_in_namespaces "$nsfile")
	[[ -z $pids ]] || die "processes keep appearing in the lab's namespaces: $pids"
}

# sweep_cgroups: the containers a node's containerd started (pod sandboxes) run in mount namespaces
# of their own, so kill_namespaces does not see them once their shim is gone; lab-runc put them in
# cgroups under cgroup_key, where they are found, killed, and their cgroups removed.
sweep_cgroups() {
	local base pids
	base=/nodeconverge-lab/$(basename "$DIR")
	local d dirs=()
	for d in /sys/fs/cgroup/*"$base" /sys/fs/cgroup"$base"; do
		[[ -d $d ]] && dirs+=("$d")
	done
	((${#dirs[@]})) || return 0
	for _ in 1 2 3; do
		pids=$( (find "${dirs[@]}" -name cgroup.procs -exec cat {} + 2>/dev/null || true) | sort -u)
		[[ -n $pids ]] || break
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		# shellcheck disable=SC2086
		wait_dead 5 $pids || true
	done
	find "${dirs[@]}" -depth -type d -exec rmdir {} + 2>/dev/null || true
}

cmd_down() {
	local purge=0
	while (($#)); do
		case $1 in
		--dir) DIR=$2; shift ;;
		--purge) purge=1 ;;
		*) die "down: unknown argument $1" ;;
		esac
		shift
	done
	[[ -n ${DIR:-} ]] || die "down: --dir is required"
	[[ -d $DIR ]] || return 0
	DIR=$(cd "$DIR" && pwd)
	[[ -d $DIR/nodes ]] || return 0
	local nsfile
	nsfile=$(mktemp)
	lab_namespaces | sort -u >"$nsfile"
	# Kill processes of this lab that are outside any node namespace but were started by us and
	# survived (an nsenter still in setns cannot exist: it execs immediately).
	kill_namespaces "$nsfile"
	rm -f "$nsfile"
	sweep_cgroups
	local nd
	for nd in "$DIR"/nodes/*/; do
		rm -f "$nd/holder.pid" "$nd/sshd.pid" "$nd/containerd.pid"
	done
	if ((purge)); then
		[[ -r $DIR/lab.env || -d $DIR/nodes ]] || die "down --purge: $DIR does not look like a lab dir"
		rm -rf -- "$DIR"
	fi
}

# ---------------------------------------------------------------------------------------------------
# exec, stop-sshd, start-sshd, status

parse_dir_name() {
	NAME=""
	while (($#)); do
		case $1 in
		--dir) DIR=$2; shift ;;
		--) shift; break ;;
		-*) die "unknown argument $1" ;;
		*) [[ -z $NAME ]] || break; NAME=$1 ;;
		esac
		shift
	done
	REST=("$@")
	[[ -n ${DIR:-} && -n $NAME ]] || die "need --dir DIR NAME"
	DIR=$(cd "$DIR" && pwd)
	[[ -d $DIR/nodes/$NAME ]] || die "no node $NAME in $DIR"
}

cmd_exec() {
	parse_dir_name "$@"
	((${#REST[@]})) || die "exec: no command"
	local hp
	hp=$(require_holder "$NAME")
	exec nsenter -m -t "$hp" --wd=/ -- env -i PATH="$NODE_PATH_ENV" HOME=/root USER=root LOGNAME=root \
		SHELL=/bin/sh LANG=C.UTF-8 "${REST[@]}"
}

sshd_pids() {
	# All sshd processes of the node (listener and per-connection children).
	local hp=$1 ns
	ns=$(mntns_of "$hp")
	proc_namespaces |
		awk -v ns="$ns" '$2 == ns { split($1, p, "/"); print p[3] }' |
		while read -r p; do
			[[ $(cat "/proc/$p/comm" 2>/dev/null) == sshd ]] && echo "$p"
		done
	return 0
}

cmd_stop_sshd() {
	parse_dir_name "$@"
	local hp pids end
	hp=$(require_holder "$NAME")
	pids=$(sshd_pids "$hp")
	[[ -n $pids ]] || return 0
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null || true
	# shellcheck disable=SC2086
	if ! wait_dead 10 $pids; then
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		# shellcheck disable=SC2086
		wait_dead 5 $pids || die "node $NAME: sshd survived SIGKILL: $pids"
	fi
	rm -f "$(node_dir "$NAME")/sshd.pid"
}

cmd_start_sshd() {
	parse_dir_name "$@"
	load_env
	PORT=$LAB_PORT
	local hp addr
	hp=$(require_holder "$NAME")
	[[ -z $(sshd_pids "$hp") ]] || return 0
	# shellcheck disable=SC1091
	addr=$(source "$(node_dir "$NAME")/node.env" && echo "$ADDR")
	start_sshd_in "$NAME"
	wait_listening "$addr:$PORT"
}

# import-image: the sandbox image into a node whose containerd was not running at `up` (scenario
# none, --no-containerd, omen's refused config) once a test has started it.
cmd_import_image() {
	parse_dir_name "$@"
	build_standins
	import_image_in "$NAME" || {
		cat "$(node_dir "$NAME")/import.out" >&2
		die "node $NAME: importing the sandbox image failed"
	}
}

cmd_status() {
	while (($#)); do
		case $1 in
		--dir) DIR=$2; shift ;;
		*) die "status: unknown argument $1" ;;
		esac
		shift
	done
	DIR=$(cd "$DIR" && pwd)
	load_env
	local name hp
	for name in $LAB_NODES; do
		hp=$(holder_pid "$name")
		if [[ -z $hp ]]; then
			echo "$name down"
			continue
		fi
		echo "$name up sshd=$([[ -n $(sshd_pids "$hp") ]] && echo up || echo down) containerd=$(nsenter -m -t "$hp" -- /usr/local/sbin/systemctl is-active containerd || true)"
	done
}

main() {
	(($#)) || usage
	local sub=$1
	shift
	case $sub in
	up) cmd_up "$@" ;;
	down) cmd_down "$@" ;;
	exec) cmd_exec "$@" ;;
	stop-sshd) cmd_stop_sshd "$@" ;;
	start-sshd) cmd_start_sshd "$@" ;;
	import-image) cmd_import_image "$@" ;;
	status) cmd_status "$@" ;;
	-h | --help | help) usage ;;
	*) die "unknown subcommand $sub" ;;
	esac
}

main "$@"
