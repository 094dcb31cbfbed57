#!/usr/bin/env bash
# deps.sh — install what `make demo`, `make test` and `make bench` need on this machine, and nothing
# when it is all there. Idempotent: every package is checked by the file it provides, so a second run
# costs a few stat calls and never touches apt. Run as root (apt, sysctl).
#
# What needs what:
#   openssh-server openssh-client  the lab: a real sshd per node; ssh/ssh-keygen for keys and the bench floor
#   containerd runc                the real containerd 1.x daemon and validator on every lab node
#   util-linux iproute2 procps     unshare/nsenter (node namespaces), ss (sshd readiness), sysctl/ps
#   sudo                           become tests (sshconn TestBecome)
#   ansible-core                   `ansible-inventory` (inventory parity tests), `ansible-playbook` (bench peer)
#   ansible                        Debian's collections for ansible-core: community.general.modprobe and
#                                  ansible.posix.sysctl, which the Ansible-parity e2e playbooks run
#   gcc libc6-dev                  cgo, which `go test -race` and the nvidia-ctk build (lab/nvidia-ctk) need
#   ShellCheck (shellcheck)        `make test` lints every shell script (engine/node/sh: the node-side scripts)
#   chromium fonts-dejavu-core     headless Chromium (lab/browser) for the HTML report's browser test and its bench
#   git make ca-certificates       the build itself
set -euo pipefail

((EUID == 0)) || {
	echo "deps.sh: must run as root (apt-get, sysctl)" >&2
	exit 1
}

# package:file — the package is missing when its file is.
want=(
	openssh-server:/usr/sbin/sshd
	openssh-client:/usr/bin/ssh-keygen
	containerd:/usr/bin/containerd
	runc:/usr/sbin/runc
	util-linux:/usr/bin/nsenter
	iproute2:/usr/bin/ss
	procps:/usr/sbin/sysctl
	sudo:/usr/bin/sudo
	ansible-core:/usr/bin/ansible-inventory
	ansible:/usr/lib/python3/dist-packages/ansible_collections/community/general/plugins/modules/modprobe.py
	gcc:/usr/bin/gcc
	libc6-dev:/usr/include/stdio.h
	shellcheck:/usr/bin/shellcheck
	git:/usr/bin/git
	make:/usr/bin/make
	ca-certificates:/etc/ssl/certs/ca-certificates.crt
	chromium:/usr/bin/chromium
	fonts-dejavu-core:/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
)
missing=()
for pf in "${want[@]}"; do
	[[ -e ${pf#*:} ]] || missing+=("${pf%%:*}")
done
if ((${#missing[@]})); then
	echo "deps.sh: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	for pf in "${want[@]}"; do
		[[ -e ${pf#*:} ]] || {
			echo "deps.sh: ${pf%%:*} installed but ${pf#*:} is still missing" >&2
			exit 1
		}
	done
fi

# Every lab node runs a real containerd, and each takes inotify instances from root's machine-wide
# budget (kernel default 128); the test packages run several labs at once. Raised, never lowered.
want_instances=8192
have=$(cat /proc/sys/fs/inotify/max_user_instances)
if ((have < want_instances)); then
	sysctl -qw fs.inotify.max_user_instances=$want_instances
fi
