#!/usr/bin/env bash
# demo.sh LAB_DIR — the README's `make demo`: start the incident's 4-node lab,
# show what containerd really loads, plan the fix (check mode), apply it, apply
# again to show nothing changes, and stop the lab. Run as root.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/tmp/nclab}
nc="$here/bin/nodeconverge"
# The shipped inventory names the default lab's key (/tmp/nclab); a lab elsewhere (make demo
# LAB_DIR=...) is reached through the inventory lab.sh writes for it (same hosts and group).
inv="$here/inventories/lab.yaml"
[[ $dir == /tmp/nclab ]] || inv="$dir/inventory.yaml"
pb="$here/playbooks/gpu-containerd.yaml"
common=(-i "$inv" --known-hosts "$dir/known_hosts" --ssh-config /dev/null)

"$here/lab/lab.sh" down --dir "$dir" --purge >/dev/null 2>&1 || true
"$here/lab/lab.sh" up --dir "$dir" --nodes 4 --scenario incident
trap '"$here/lab/lab.sh" down --dir "$dir"' EXIT

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# expect CODE CMD... runs CMD and fails the demo unless it exits with CODE.
expect() {
	local want=$1; shift
	set +e; "$@"; local got=$?; set -e
	if [ "$got" != "$want" ]; then
		echo "demo: expected exit $want, got $got: $*" >&2
		exit 1
	fi
	echo "(exit $got, as expected)"
}

step "What nuc1's containerd really loads, and which declared values are in effect (measured with its own binary; read-only)"
expect 0 "$nc" explain "${common[@]}" -l nuc1 --playbook "$pb"

step "Check mode: the plan, with file diffs and the effective-config diff (exit 2 = drift)"
expect 2 "$nc" apply "${common[@]}" --check --diff "$pb"

step "Apply"
expect 0 "$nc" apply "${common[@]}" "$pb"

step "Apply again: nothing changes"
expect 0 "$nc" apply "${common[@]}" "$pb"

step "Check mode on the converged lab (exit 0 = in sync)"
expect 0 "$nc" apply "${common[@]}" --check "$pb"

step "Proof by pod: each node's running containerd starts (and removes) a pod sandbox through every runtime; no file is written"
expect 0 "$nc" apply "${common[@]}" --check --prove "$pb"

step "nuc2's toolkit breaks (its nvidia-container-runtime exits 1): no file changed, yet --prove names the runtime and its error (exit 1)"
cat >"$dir/nodes/nuc2/usr/local/nvidia/toolkit/nvidia-container-runtime" <<'EOF'
#!/bin/sh
# The demo's broken toolkit: it exits 1 with its error where runc's --log points, as the real one does.
log=
prev=
for a in "$@"; do
	[ "$prev" = --log ] && log=$a
	prev=$a
done
[ -n "$log" ] && echo '{"level":"error","msg":"nvidia-container-runtime: driver not loaded"}' >>"$log"
exit 1
EOF
expect 1 "$nc" apply "${common[@]}" --check --prove -l nuc2 "$pb"

step "nvidia runtimes as containerd now loads them on every node"
for n in nuc1 nuc2 omen omen2; do
	printf '%-6s ' "$n"
	"$here/lab/lab.sh" exec --dir "$dir" "$n" -- sh -c 'containerd config dump 2>/dev/null | grep -c "runtimes.nvidia" ; systemctl is-active containerd' | tr '\n' ' '
	echo
done
