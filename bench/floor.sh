#!/usr/bin/env bash
# floor.sh DIR drift|converge|true: the machine's floor for a workload on the lab in DIR — one
# OpenSSH connection per node, all nodes at once, doing only the essential remote work and sending
# its output back. bench/run.sh times it like the tools.
#
#   true      `ssh node true`: connection setup, authentication and one session, nothing else.
#   drift     the no-change drift run: what containerd loads (`containerd config dump`), the
#             candidate check (`containerd --config FILE config dump`), the managed files and the
#             live inotify values.
#   converge  the same reads, then the writes the fix needs: the sysctl file, applied with
#             `sysctl -p`; a validated config.toml (staged, `containerd --config <staged> config
#             dump`, renamed into place); the shadowing drop-in moved out of conf.d; one
#             `systemctl restart containerd`, then polling `ctr plugins ls` until the CRI plugin is ok,
#             then the proof by pod (below).
#   prove     the proof by pod alone: with the node's crictl, a host-network pod sandbox through each
#             runtime (nvidia, nvidia-cdi, nvidia-legacy, runc; at once), READY, stopped, removed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: floor.sh DIR drift|converge|true}
mode=${2:?usage: floor.sh DIR drift|converge|true}
# shellcheck disable=SC1091
source "$dir/lab.env"

reads='containerd config dump
containerd --config /etc/containerd/config.toml config dump
cat /etc/sysctl.d/99-inotify.conf /proc/sys/fs/inotify/max_user_instances /proc/sys/fs/inotify/max_user_watches
cat /etc/containerd/config.toml /etc/containerd/conf.d/*.toml /etc/containerd/certs.d/harbor.lab/hosts.toml'
# The proof by pod with crictl (bench/run.sh links it into every node): the essential work of a
# health gate since issue 26, the same sandboxes nodeconverge starts (with the proof's systemd cgroup
# parent: the nodes' runtimes set SystemdCgroup, and runc refuses a sandbox without one). Run by the node's bash.
# shellcheck disable=SC2016 # expanded on the node
prove='ep=unix:///run/containerd/containerd.sock
i=0
until crictl -r $ep --timeout 10s info >/dev/null 2>&1; do i=$((i + 1)); [ $i -lt 600 ] || { echo "floor: crictl info never answered" >&2; exit 1; }; sleep 0.1; done
for h in nvidia nvidia-cdi nvidia-legacy runc; do
	(cfg="{\"metadata\":{\"name\":\"floor-$h\",\"uid\":\"floor-$h\",\"namespace\":\"floor\"},\"linux\":{\"cgroup_parent\":\"nodeconverge-proof.slice\",\"security_context\":{\"namespace_options\":{\"network\":2}}}}"
	id=$(printf %s "$cfg" | crictl -r $ep --timeout 120s runp --runtime $h /dev/stdin 2>/dev/null) &&
	[ "$(crictl -r $ep --timeout 60s inspectp -o go-template --template "{{.status.state}}" "$id" 2>/dev/null)" = SANDBOX_READY ] &&
	crictl -r $ep --timeout 60s stopp "$id" >/dev/null 2>&1 && crictl -r $ep --timeout 60s rmp "$id" >/dev/null 2>&1 ||
	{ echo "floor: the proof through $h failed" >&2; exit 1; }) &
done
fail=0
for j in 1 2 3 4; do wait -n || fail=1; done 2>/dev/null
[ $fail = 0 ]'
case $mode in
true) script=true ;;
drift) script=$reads ;;
prove) script="bash -c '$prove'" ;;
converge)
	# The converged config.toml travels inside the script: still one connection and one session.
	script="$reads 2>/dev/null || true
set -e
cat > /etc/sysctl.d/99-inotify.conf <<'NCBENCH_EOF'
$(cat "$here/ansible/files/99-inotify.conf")
NCBENCH_EOF
sysctl -q -p /etc/sysctl.d/99-inotify.conf
cat > /etc/containerd/config.toml.new <<'NCBENCH_EOF'
$(cat "$here/ansible/files/config.toml")
NCBENCH_EOF
containerd --config /etc/containerd/config.toml.new config dump >/dev/null
mv /etc/containerd/config.toml.new /etc/containerd/config.toml
mkdir -p /etc/containerd/conf.d.disabled
mv /etc/containerd/conf.d/zz-labhub-registry.toml /etc/containerd/conf.d.disabled/
mkdir -p /etc/containerd/certs.d/harbor.lab
cat > /etc/containerd/certs.d/harbor.lab/hosts.toml <<'NCBENCH_EOF'
$(cat "$here/ansible/files/hosts.toml")
NCBENCH_EOF
systemctl restart containerd
i=0
until ctr plugins ls | awk '\$1 == \"io.containerd.grpc.v1\" && \$2 == \"cri\" { s = \$NF } END { exit s != \"ok\" }'; do
	i=\$((i + 1)); [ \$i -lt 300 ] || { echo 'floor: the CRI plugin never came up' >&2; exit 1; }; sleep 0.1
done"
	# The converge's gate includes the proof by pod since issue 26.
	script+=$'\n'"bash -c '$prove'"
	;;
*)
	echo "floor.sh: unknown mode $mode" >&2
	exit 2
	;;
esac

# Each node's stderr goes to a file, shown when that node fails (a failure stops the bench).
errs=$(mktemp -d)
trap 'rm -rf "$errs"' EXIT
pids=() names=()
for na in $LAB_NODE_ADDRS; do
	ssh -F /dev/null -i "$LAB_KEY" -o UserKnownHostsFile="$LAB_KNOWN_HOSTS" -o StrictHostKeyChecking=yes \
		-o BatchMode=yes -p "$LAB_PORT" "root@${na#*=}" "$script" >/dev/null 2>"$errs/${na%%=*}" &
	pids+=($!)
	names+=("${na%%=*}")
done
fail=0
for i in "${!pids[@]}"; do
	wait "${pids[i]}" && continue
	fail=$((fail + 1))
	echo "floor.sh: node ${names[i]} failed ($mode); its stderr:" >&2
	tail -n 20 "$errs/${names[i]}" >&2
done
if ((fail)); then
	echo "floor.sh: $fail of ${#pids[@]} nodes failed ($mode)" >&2
	exit 1
fi
