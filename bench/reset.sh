#!/usr/bin/env bash
# reset.sh DIR incident|converged [--no-restart]: put every node of the lab in DIR into a known
# state by rewriting its files from the host side (DIR/nodes/NAME/etc/containerd is the node's
# /etc/containerd), faster than `lab.sh down; up` and without touching sshd.
#
#   incident   the incident's files on every node (lab/scenarios/incident): config.toml, the GPU
#              Operator's conf.d/99-nvidia.toml and the shadowing conf.d/zz-labhub-registry.toml;
#              every OMEN_EVERY-th node (default 4, as omen was 1 of the 4 incident nodes) also has
#              the nvidia block appended twice, so its containerd refuses to start. No
#              /etc/sysctl.d/99-inotify.conf and the inotify limits of a fresh node (128 instances).
#              nodeconverge's state dir (/var/lib/nodeconverge) is emptied: every converge run
#              meets a fresh node.
#   converged  the fixed state: config.toml, conf.d/99-nvidia.toml, zz-labhub-registry.toml in
#              conf.d.disabled, certs.d/harbor.lab/hosts.toml, 99-inotify.conf and its live values (used by the 500-node drift
#              run, whose nodes run no containerd).
#
# Unless --no-restart, containerd is then restarted on every node (in parallel) so each daemon runs
# what its files say, as on the incident's nodes (the omen-like ones end up `failed`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scen=$here/../lab/scenarios/incident
dir=${1:?usage: reset.sh DIR incident|converged [--no-restart]}
state=${2:?usage: reset.sh DIR incident|converged [--no-restart]}
restart=1
[[ ${3:-} == --no-restart ]] && restart=0
every=${OMEN_EVERY:-4}
watches=$(</proc/sys/fs/inotify/max_user_watches)
# shellcheck disable=SC1091
source "$dir/lab.env"

i=0
for name in $LAB_NODES; do
	i=$((i + 1))
	nd=$dir/nodes/$name
	c=$nd/etc/containerd
	rm -rf "$c/conf.d.disabled" "$c/conf.d" "$c/certs.d"
	mkdir -p "$c/conf.d"
	cp "$scen/config.toml" "$c/config.toml"
	cp "$scen/99-nvidia.toml" "$c/conf.d/99-nvidia.toml"
	case $state in
	incident)
		cp "$scen/zz-labhub-registry.toml" "$c/conf.d/zz-labhub-registry.toml"
		if ((every > 0 && i % every == 0)); then
			cat "$scen/omen-nvidia-append.toml" "$scen/omen-nvidia-append.toml" >>"$c/config.toml"
		fi
		# The directories are bind-mount targets inside the node: empty them, keep them.
		find "$nd/var/lib/nodeconverge" "$nd/etc/sysctl.d" -mindepth 1 -delete
		# The node's live inotify values (files bind-mounted over /proc/sys) back to a fresh node's.
		echo 128 >"$nd/proc/sys/fs/inotify/max_user_instances"
		echo "$watches" >"$nd/proc/sys/fs/inotify/max_user_watches"
		;;
	converged)
		mkdir -p "$c/conf.d.disabled"
		cp "$scen/zz-labhub-registry.toml" "$c/conf.d.disabled/zz-labhub-registry.toml"
		cp "$here/ansible/files/99-inotify.conf" "$nd/etc/sysctl.d/99-inotify.conf"
		mkdir -p "$c/certs.d/harbor.lab"
		cp "$here/ansible/files/hosts.toml" "$c/certs.d/harbor.lab/hosts.toml"
		echo 8192 >"$nd/proc/sys/fs/inotify/max_user_instances"
		echo 1048576 >"$nd/proc/sys/fs/inotify/max_user_watches"
		;;
	*)
		echo "reset.sh: unknown state $state" >&2
		exit 2
		;;
	esac
done
((restart)) || exit 0

# Restart every daemon, 8 at a time (containerd start is CPU-bound on this 2-core machine).
i=0
for name in $LAB_NODES; do
	nd=$dir/nodes/$name
	nsenter -m -t "$(<"$nd/holder.pid")" --wd=/ -- env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		systemctl restart containerd >"$nd/bench-restart.out" 2>&1 &
	i=$((i + 1))
	((i % 8)) || wait
done
# A refused config (the omen-like nodes) makes `systemctl restart` exit 1: that is the state wanted.
wait || true
