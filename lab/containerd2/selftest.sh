#!/bin/sh
# selftest.sh BIN — check that containerd 2.x at BIN deep-merges config
# imports: the incident's layout (a version 3 main config importing conf.d/,
# 99-nvidia.toml defining three runtimes plus the registry config_path, and a
# later zz-labhub-registry.toml that mentions only the registry) must keep all
# three nvidia runtimes in `config dump`. On 1.6 the same shape, in version 2
# layout, loses them; this script is what tells the two behaviours apart.
#
# A negative control runs first so a broken grep cannot pass vacuously: with
# 99-nvidia.toml absent the runtimes must be missing.
#
# Exits 0 when 2.x keeps the runtimes, non-zero otherwise. Needs no daemon,
# no root and no state directories: `config dump` only reads the files.
set -eu

if [ $# -ne 1 ]; then
	echo "usage: $0 CONTAINERD_BIN" >&2
	exit 2
fi
bin=$1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/conf.d" "$tmp/off"

cat >"$tmp/config.toml" <<TOML
version = 3
root = "$tmp/root"
state = "$tmp/state"
imports = ["$tmp/conf.d/*.toml"]

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
    SystemdCgroup = true
TOML

nvidia="$tmp/off/99-nvidia.toml"
{
	printf 'version = 3\n\n'
	printf '[plugins."io.containerd.cri.v1.images".registry]\n'
	printf '  config_path = "/etc/containerd/certs.d"\n'
	for rt in nvidia:nvidia-container-runtime \
		nvidia-cdi:nvidia-container-runtime.cdi \
		nvidia-legacy:nvidia-container-runtime.legacy; do
		name=${rt%%:*}
		exe=${rt#*:}
		t="plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.$name"
		printf '\n[%s]\n  runtime_type = "io.containerd.runc.v2"\n' "$t"
		printf '  [%s.options]\n' "$t"
		printf '    BinaryName = "/usr/local/nvidia/toolkit/%s"\n' "$exe"
		printf '    SystemdCgroup = true\n'
	done
} >"$nvidia"

cat >"$tmp/conf.d/zz-labhub-registry.toml" <<'TOML'
version = 3
# LabHub: trust the Harbor (HTTP) registry
[plugins."io.containerd.cri.v1.images".registry]
  config_path = "/etc/containerd/certs.d"
TOML

# dump writes the effective config; a failed load is a failed self-test,
# never an empty result that the checks below might misread.
dump() {
	if ! "$bin" --config "$tmp/config.toml" config dump >"$1" 2>"$1.err"; then
		echo "FAIL: $bin config dump exited non-zero:" >&2
		cat "$1.err" >&2
		exit 1
	fi
}

# count_tables OUT NAME counts runtime tables named exactly NAME, whatever
# quote style the dump uses ('...' in 2.x, "..." in 1.6).
count_tables() {
	grep -c "containerd\.runtimes\.$2\]" "$1" || true
}

dump "$tmp/control.out"
if [ "$(count_tables "$tmp/control.out" 'nvidia[a-z-]*')" -ne 0 ]; then
	echo "FAIL: control: nvidia runtimes present without 99-nvidia.toml" >&2
	exit 1
fi

mv "$nvidia" "$tmp/conf.d/"
dump "$tmp/dump.out"

fail=0
for name in nvidia nvidia-cdi nvidia-legacy; do
	if [ "$(count_tables "$tmp/dump.out" "$name")" -ne 1 ]; then
		echo "FAIL: runtime $name missing from the effective config" >&2
		fail=1
	fi
done
for want in \
	"BinaryName = '/usr/local/nvidia/toolkit/nvidia-container-runtime'" \
	"BinaryName = '/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi'" \
	"BinaryName = '/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy'" \
	"config_path = '/etc/containerd/certs.d'"; do
	if ! grep -qF "$want" "$tmp/dump.out"; then
		echo "FAIL: effective config lacks: $want" >&2
		fail=1
	fi
done
# runc comes from the main file and the nvidia runtimes from a drop-in, both
# in the io.containerd.cri.v1.runtime plugin: only a deep merge keeps both.
# (zz-labhub-registry.toml touches io.containerd.cri.v1.images alone, so in
# the v3 layout it could not hide the runtimes even under 1.x's per-plugin
# replacement; this check is the one that tells the merge rules apart.)
if ! sed -n "/containerd\.runtimes\.runc\.options\]/,/^ *\[/p" "$tmp/dump.out" |
	grep -q 'SystemdCgroup = true'; then
	echo "FAIL: runc lost SystemdCgroup = true from the main config" >&2
	fail=1
fi

if [ "$fail" -ne 0 ]; then
	echo "runtime tables in the effective config:" >&2
	grep 'containerd\.runtimes\.' "$tmp/dump.out" >&2 || true
	exit 1
fi
echo "ok: $("$bin" --version) deep-merges imports; nvidia runtimes survive zz-labhub-registry.toml"
