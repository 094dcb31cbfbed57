#!/usr/bin/env bash
# html.sh DIR WORK NODECONVERGE OUT — the HTML report at fleet size, for `make bench` (run.sh calls it
# on its lab once the side-by-side is done; see bench/README.md). Run as root, under the bench lock.
#
# A synthetic 2,000-host run: every lab node of DIR is named HTML_ALIASES times in an inventory of
# its own (node01-a01 ... node50-a40), each alias a host of its own for nodeconverge (its own SSH
# connection, plan and results), in groups gpu and rackNN (one per lab node). The lab is put in the
# incident's state, the first half of the nodes converged, one node's sshd stopped; then one
# `apply --check --diff` of the shipped playbook writes the HTML report (and the JSON one, for the
# size ratio): half the hosts ok, the others would change, but the 40 of the stopped node unreachable.
# bench/htmlrender opens the page in headless Chromium and times the first render, one status filter
# and one host panel. Figures go to OUT (appended) and to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
DIR=${1:?usage: html.sh DIR WORK NODECONVERGE OUT}
W=${2:?}
NC=${3:?}
OUT=${4:?}
ALIASES=${HTML_ALIASES:-40}
HFORKS=${HTML_FORKS:-50}
log() { printf '%s html.sh: %s\n' "$(date +%T)" "$*" >&2; }
# shellcheck disable=SC1091
source "$DIR/lab.env"
read -r -a NODES <<<"$LAB_NODES"
(cd "$root" && "${GO:-go}" build -o "$W/htmlrender" ./bench/htmlrender)

inv=$W/html-inventory.yaml
{
	echo "all:"
	echo "  vars:"
	echo "    ansible_ssh_common_args: \"-o UserKnownHostsFile=$LAB_KNOWN_HOSTS -o StrictHostKeyChecking=yes\""
	echo "    ansible_user: root"
	echo "    ansible_ssh_private_key_file: $LAB_KEY"
	echo "    ansible_port: $LAB_PORT"
	echo "  children:"
	echo "    gpu:"
	echo "      children:"
	for ((i = 0; i < ${#NODES[@]}; i++)); do printf '        rack%02d:\n' $((i + 1)); done
	for ((i = 0; i < ${#NODES[@]}; i++)); do
		n=${NODES[i]}
		addr=
		for kv in $LAB_NODE_ADDRS; do [[ ${kv%%=*} == "$n" ]] && addr=${kv#*=}; done
		printf '    rack%02d:\n      hosts:\n' $((i + 1))
		for ((a = 1; a <= ALIASES; a++)); do printf '        %s-a%02d:\n          ansible_host: %s\n' "$n" "$a" "$addr"; done
	done
} >"$inv"
hosts=$((ALIASES * ${#NODES[@]}))

"$here/reset.sh" "$DIR" incident
half=$(((${#NODES[@]} + 1) / 2))
printf '%s\n' "${NODES[@]:0:half}" >"$W/html-half.limit"
"$NC" apply -i "$LAB_INVENTORY" --known-hosts "$LAB_KNOWN_HOSTS" --ssh-config /dev/null -f "$half" -l "@$W/html-half.limit" \
	"$W/nc.yaml" >"$W/html-converge.out" 2>&1 || {
	echo "html.sh: converging the first half failed; see $W/html-converge.out" >&2
	exit 1
}
down=${NODES[${#NODES[@]} - 1]}
"$root/lab/lab.sh" stop-sshd --dir "$DIR" "$down" >/dev/null

# A nightly check looks at the whole fleet: without max_fail_percentage, one host's failure does not
# leave the rest of the page "not attempted".
sed '/^  max_fail_percentage: /d' "$W/nc.yaml" >"$W/nc-html.yaml"
log "check --diff of $hosts hosts ($ALIASES per lab node, -f $HFORKS) with --report html and json"
set +e
"$W/measure" -o "$W/html-check.json" -- "$NC" apply --check --diff -i "$inv" --known-hosts "$LAB_KNOWN_HOSTS" --ssh-config /dev/null \
	-f "$HFORKS" --report html="$W/fleet.html" --report json="$W/fleet.json" "$W/nc-html.yaml" >"$W/html-check.out" 2>&1 </dev/null
# The same check without --diff: the page of a run that keeps file content out of every report.
"$NC" apply --check -i "$inv" --known-hosts "$LAB_KNOWN_HOSTS" --ssh-config /dev/null \
	-f "$HFORKS" --report html="$W/fleet-nodiff.html" "$W/nc-html.yaml" >"$W/html-check-nodiff.out" 2>&1 </dev/null
set -e
"$root/lab/lab.sh" start-sshd --dir "$DIR" "$down" >/dev/null
[[ -s $W/fleet.html ]] || {
	echo "html.sh: no HTML report; see $W/html-check.out" >&2
	exit 1
}
log "render in headless chromium"
"$W/htmlrender" "$W/fleet.html" >"$W/html-render.json"
/usr/bin/python3 - "$W/html-render.json" "$W/html-check.json" "$W/fleet.json" "$hosts" "$HFORKS" "$ALIASES" "$W/fleet-nodiff.html" >>"$OUT" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))
js = os.path.getsize(sys.argv[3])
nodiff = os.path.getsize(sys.argv[7]) if os.path.exists(sys.argv[7]) else 0
hosts, forks, aliases = int(sys.argv[4]), sys.argv[5], sys.argv[6]
st = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
print(f"""
## The HTML report at {r['hosts']} hosts (`--report html`, bench/html.sh)

A synthetic `apply --check --diff` of the shipped playbook against {hosts} inventory hosts (the lab's
nodes, each named {aliases} times), -f {forks}; hosts by status: {st}.
Opened in headless Chromium (Debian's, lab/browser) by bench/htmlrender.

| figure | value |
| --- | ---: |
| HTML file (`--diff`) | {r['bytes'] / 1e6:.2f} MB |
| per host | {r['bytes_per_host'] / 1024:.1f} KB |
| JSON report of the same run (indented) | {js / 1e6:.2f} MB |
| HTML file of the same check without `--diff` (no file content) | {nodiff / 1e6:.2f} MB, {nodiff / max(1, r['hosts']) / 1024:.1f} KB/host |
| open until the fleet is laid out | {r['load_ms']:.0f} ms |
| of which the page's script | {r['script_ms']:.0f} ms |
| filter to `{r['filter_status']}` ({r['filter_rows']} rows shown) | {r['filter_ms']:.0f} ms |
| open one host's panel | {r['open_host_ms']:.0f} ms |
| the check run: wall, peak RSS | {c['wall_s']:.1f} s, {c['maxrss_kb'] / 1024:.0f} MB |
""")
PY
log "HTML report: $(/usr/bin/python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("%d hosts, %.2f MB, %.1f KB/host, render %.0f ms, filter %.0f ms" % (r["hosts"], r["bytes"] / 1e6, r["bytes_per_host"] / 1024, r["load_ms"], r["filter_ms"]))' "$W/html-render.json")"
