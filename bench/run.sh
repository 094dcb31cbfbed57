#!/usr/bin/env bash
# run.sh — `make bench`: nodeconverge side by side with ansible-playbook and with the machine's
# floor on one local lab (see bench/README.md). Run as root.
#
# Environment (all optional):
#   N=50          lab nodes
#   RUNS=5        timed runs per tool and workload (the tools alternate run by run)
#   SERIAL=all    `all`: both playbooks without `serial` (every host at once, forks = N: the
#                 nightly fleet-wide drift run); `shipped`: serial: 1 as shipped (slow: N batches)
#   SCALE=500     instead of the side-by-side: only nodeconverge's no-change drift run on SCALE
#                 nodes without containerd daemons (RUNS defaults to 3 there), alternating with the
#                 same run limited (-l) to the first SMALL nodes, for peak RSS against fleet size
#   SMALL=200     SCALE mode: the limited run's host count (same -f)
#   BENCH_DIR=/tmp/ncbench  BENCH_NET=127.60.0  lab directory and addresses
#   BENCH_OUT=bench/results.md (SCALE mode: bench/results-scale.md)
#   FORKS         nodeconverge -f (default N side by side, 50 in SCALE mode); Ansible always N
#   BENCH_WORK=BENCH_DIR-work     every run's output, runs.tsv, traces (kept after the lab is gone)
#   PROFILE=1     SCALE mode: one more drift run under `perf record`, summaries in BENCH_WORK
#   NC_BASE=FILE  instead of the side-by-side: nodeconverge against another build of itself (FILE,
#                 e.g. the binary of the commit before a change), converge and drift, RUNS each,
#                 alternating which goes first; the table (BENCH_OUT, default bench/results-base.md)
#                 gives each one's median and new/base
#   HTML=1        side by side: afterwards, the HTML report of a 2,000-host check (bench/html.sh:
#                 size per host, render and filter time in headless Chromium) into HTML_OUT
#                 (default bench/results-html.md); HTML=0 skips it; HTML=only runs just that step
#                 (on an N-node lab, as in the side-by-side)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
SCALE=${SCALE:-}
NC_BASE=${NC_BASE:-}
if [[ -n $SCALE ]]; then
	N=$SCALE
	RUNS=${RUNS:-3}
	OUT=${BENCH_OUT:-$here/results-scale.md}
elif [[ -n $NC_BASE ]]; then
	N=${N:-50}
	RUNS=${RUNS:-5}
	OUT=${BENCH_OUT:-$here/results-base.md}
	HTML=0
else
	N=${N:-50}
	RUNS=${RUNS:-5}
	OUT=${BENCH_OUT:-$here/results.md}
fi
SERIAL=${SERIAL:-all}
DIR=${BENCH_DIR:-/tmp/ncbench}
NET=${BENCH_NET:-127.60.0}
NC=$root/bin/nodeconverge
LAB=$root/lab/lab.sh
AP=/usr/bin/ansible-playbook
# Work files (playbooks as run, every run's output, runs.tsv, strace traces) outlive the lab.
W=${BENCH_WORK:-$DIR-work}
((EUID == 0)) || {
	echo "run.sh: must run as root (the lab uses mount namespaces)" >&2
	exit 1
}
[[ -x $NC ]] || {
	echo "run.sh: $NC missing (make build)" >&2
	exit 1
}
[[ -n $SCALE || -x $AP ]] || {
	echo "run.sh: $AP missing (apt-get install ansible-core)" >&2
	exit 1
}

log() { printf '%s run.sh: %s\n' "$(date +%T)" "$*" >&2; }

"$LAB" down --dir "$DIR" --purge >/dev/null 2>&1 || true
trap '"$LAB" down --dir "$DIR" --purge >/dev/null 2>&1 || true' EXIT
go_bin=${GO:-go}
mkdir -p "$DIR"
(cd "$root" && "$go_bin" build -o "$DIR/measure" ./bench/measure)
MEASURE=$DIR/measure

if [[ -n $SCALE ]]; then
	"$LAB" up --dir "$DIR" --nodes "$N" --net "$NET" --scenario clean --no-containerd >/dev/null
else
	"$LAB" up --dir "$DIR" --nodes "$N" --net "$NET" --scenario incident >/dev/null
fi
# shellcheck disable=SC1091
source "$DIR/lab.env"
rm -rf "$W"
mkdir -p "$W"
# A private copy of the binary: bin/ is shared with whoever runs `make build` during the bench.
cp "$NC" "$W/nodeconverge"
NC=$W/nodeconverge
NC_SHA=$(sha256sum "$NC" | cut -c1-12)
if [[ -n $NC_BASE ]]; then
	cp "$NC_BASE" "$W/nodeconverge-base"
	NC_BASE=$W/nodeconverge-base
	NC_BASE_SHA=$(sha256sum "$NC_BASE" | cut -c1-12)
fi
NC_REV=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo '+dirty')
read -r -a NODES <<<"$LAB_NODES"
# The proof by pod's fallback, and the floor's and Ansible's way to start a sandbox: crictl on every
# node (lab/crictl, built once and cached in bin/).
if [[ -z $SCALE ]]; then
	"$root/lab/crictl/build.sh" "$root/bin/crictl" >/dev/null 2>&1
	for n in "${NODES[@]}"; do ln -sf "$root/bin/crictl" "$DIR/nodes/$n/usr/local/sbin/crictl"; done
fi

# Both tools read the lab's inventory: Ansible YAML with ansible_host/port/user/key, and
# ansible_ssh_common_args naming the lab's known_hosts with StrictHostKeyChecking=yes.
INV=$W/inventory.yaml
cp "$LAB_INVENTORY" "$INV"

# The playbooks as run: SERIAL=all drops `serial: 1` from both, identically.
mkdir -p "$W/ansible"
cp -r "$here/ansible/." "$W/ansible/"
if [[ $SERIAL == all ]]; then
	sed '/^  serial: 1$/d' "$root/playbooks/gpu-containerd.yaml" >"$W/nc.yaml"
	sed -i '/^  serial: 1$/d' "$W/ansible/gpu-containerd.yaml"
else
	cp "$root/playbooks/gpu-containerd.yaml" "$W/nc.yaml"
fi
# The same playbook with the restart's proof by pod off (`prove: off`): the converge with and without
# the proof, side by side, is what the proof costs.
sed '/^      containerd_restart:$/a\        prove: off' "$W/nc.yaml" >"$W/nc-noprove.yaml"
grep -q '^        prove: off$' "$W/nc-noprove.yaml" || {
	echo "run.sh: found no containerd_restart handler to turn the proof off in" >&2
	exit 1
}
export ANSIBLE_CONFIG=$here/ansible.cfg ANSIBLE_FORKS=$N ANSIBLE_NOCOLOR=1
# forks = N, like Ansible's, side by side; the scale run uses a bastion-like 50 by default (at 500,
# every handshake at once on these 2 shared cores runs into nodeconverge's 10 s connect timeout).
if [[ -n $SCALE ]]; then FORKS=${FORKS:-50}; else FORKS=${FORKS:-$N}; fi
NCARGS=(apply -i "$INV" --known-hosts "$LAB_KNOWN_HOSTS" --ssh-config /dev/null -f "$FORKS")
# The scale run streams its report as a nightly fleet run would (jsonl: memory bounded by -f); the
# side-by-side keeps the whole JSON report.
NCREPORT=(--report json="$W/report.json")
[[ -n $SCALE ]] && NCREPORT=(--report jsonl="$W/report.jsonl")
SMALL=${SMALL:-200}

# ---------------------------------------------------------------------------------------------------
# per-run measurement

# log_marks: remember each node's sshd.log size, so that a run's lines are what follows.
declare -A MARK
log_marks() {
	local n
	for n in "${NODES[@]}"; do MARK[$n]=$(stat -c %s "$DIR/nodes/$n/sshd.log"); done
}
# log_counts: per-host TCP connections ("Connection from") and SSH sessions ("Starting session:")
# since log_marks, as "conn_min conn_max conn_total sess_min sess_max sess_total".
log_counts() {
	local n
	for n in "${NODES[@]}"; do
		tail -c +$((MARK[$n] + 1)) "$DIR/nodes/$n/sshd.log" |
			awk '/Connection from/ {c++} /Starting session:/ {s++} END {print c+0, s+0}'
	done | awk 'NR==1 {cmin=cmax=$1; smin=smax=$2}
		{ if ($1<cmin) cmin=$1; if ($1>cmax) cmax=$1; if ($2<smin) smin=$2; if ($2>smax) smax=$2; c+=$1; s+=$2 }
		END {print cmin, cmax, c, smin, smax, s}'
}

TSV=$W/runs.tsv
echo -e "workload\ttool\trun\twall_s\tuser_s\tsys_s\tmaxrss_kb\texit\tconn_min\tconn_max\tconn_total\tsess_min\tsess_max\tsess_total" >"$TSV"

# measure WORKLOAD TOOL RUN CMD...: one timed run; its output goes to W/WORKLOAD-TOOL-RUN.out.
measure() {
	local wl=$1 tool=$2 run=$3 j
	shift 3
	local out=$W/$wl-$tool-$run
	log_marks
	"$MEASURE" -o "$out.json" -- "$@" >"$out.out" 2>&1 </dev/null
	j=$(<"$out.json")
	# shellcheck disable=SC2046
	set -- $(log_counts)
	printf '%s\t%s\t%s\t%s\n' "$wl" "$tool" "$run" "$(/usr/bin/python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("\t".join(str(r[k]) for k in ("wall_s", "user_s", "sys_s", "maxrss_kb", "exit")) + "\t" + "\t".join(sys.argv[2:]))
' "$j" "$@")" >>"$TSV"
	LAST_EXIT=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["exit"])' "$j")
	log "$wl $tool #$run: $(tail -1 "$TSV" | cut -f4,5,6,8,11,14 | tr '\t' ' ') (wall user sys exit conns sessions)"
}

# Each tool's runner: ansible-playbook gets its own ControlPath dir per run, so every run starts
# cold, as a nightly run would (ControlPersist masters are reaped by measure when the run ends).
run_tool() {
	local wl=$1 tool=$2 run=$3 check=()
	[[ $wl == drift ]] && check=(--check)
	[[ $wl == prove ]] && check=(--check --prove)
	case $tool in
	nodeconverge) measure "$wl" "$tool" "$run" "$NC" "${NCARGS[@]}" "${check[@]}" "${NCREPORT[@]}" "$W/nc.yaml" ;;
	nodeconverge-noprove) measure "$wl" "$tool" "$run" "$NC" "${NCARGS[@]}" "${check[@]}" "${NCREPORT[@]}" "$W/nc-noprove.yaml" ;;
	nodeconverge-base) measure "$wl" "$tool" "$run" "$NC_BASE" "${NCARGS[@]}" "${check[@]}" --report json="$W/report-base.json" "$W/nc.yaml" ;;
	nodeconverge-small) measure "$wl" "$tool" "$run" "$NC" "${NCARGS[@]}" "${check[@]}" -l "@$W/small.limit" \
		--report jsonl="$W/$wl-$tool-$run.report.jsonl" "$W/nc.yaml" ;;
	ansible)
		local cp
		cp=$(mktemp -d "$W/cp.XXXX")
		ANSIBLE_SSH_CONTROL_PATH_DIR=$cp measure "$wl" "$tool" "$run" "$AP" -i "$INV" "${check[@]}" "$W/ansible/gpu-containerd.yaml"
		rm -rf "$cp"
		;;
	floor) measure "$wl" "$tool" "$run" "$here/floor.sh" "$DIR" "$wl" ;;
	ssh-true) measure "$wl" "$tool" "$run" "$here/floor.sh" "$DIR" true ;;
	esac
	# Each proof's time per runtime handler, from the run's JSON report (the restart's proofs in a
	# converge, the `prove:` results in a --check --prove run).
	case $wl-$tool in
	converge-nodeconverge | prove-nodeconverge) proof_times "$wl" "$run" "$W/report.json" ;;
	esac
}

PROOFS=$W/proofs.tsv
echo -e "workload\trun\thost\truntime\tstatus\tseconds" >"$PROOFS"
# proof_times WORKLOAD RUN REPORT: one line per host and runtime proof into proofs.tsv.
proof_times() {
	/usr/bin/python3 -c '
import json, sys
wl, run, path = sys.argv[1:4]
for r in json.load(open(path)).get("results") or []:
    for p in r.get("proofs") or []:
        if p.get("kind") == "runtime":
            print("\t".join([wl, run, r["host"], p["name"], p["status"], "%.3f" % (p["duration_ns"] / 1e9)]))
' "$@" >>"$PROOFS"
}

# containerd_pids: "name pid" of each node's daemon as recorded by the lab's systemctl.
containerd_pids() {
	local n
	for n in "${NODES[@]}"; do echo "$n $(cat "$DIR/nodes/$n/containerd.pid" 2>/dev/null || echo none)"; done
}

# verify_converged BEFORE_PIDS_FILE [deep]: the fix is in place on every node, from the host side,
# and every daemon was restarted (a new live pid). With deep, also ask each node's containerd what
# it loads (6 nvidia runtime lines expected).
verify_converged() {
	local before=$1 deep=${2:-} n c p old bad=0
	while read -r n old; do
		c=$DIR/nodes/$n/etc/containerd
		p=$(cat "$DIR/nodes/$n/containerd.pid" 2>/dev/null || echo none)
		if [[ -e $c/conf.d/zz-labhub-registry.toml || ! -e $c/conf.d.disabled/zz-labhub-registry.toml ]] ||
			grep -q 'runtimes.nvidia' "$c/config.toml" ||
			! cmp -s "$c/conf.d/99-nvidia.toml" "$here/ansible/files/99-nvidia.toml" ||
			! cmp -s "$c/certs.d/harbor.lab/hosts.toml" "$here/ansible/files/hosts.toml" ||
			! cmp -s "$DIR/nodes/$n/etc/sysctl.d/99-inotify.conf" "$here/ansible/files/99-inotify.conf" ||
			[[ $(<"$DIR/nodes/$n/proc/sys/fs/inotify/max_user_instances") != 8192 ]] ||
			[[ $p == none || $p == "$old" || ! -d /proc/$p ]]; then
			echo "run.sh: node $n not converged (containerd pid $old -> $p)" >&2
			bad=1
		fi
	done <"$before"
	if [[ $deep == deep ]]; then
		for n in "${NODES[@]}"; do
			c=$("$LAB" exec --dir "$DIR" "$n" -- sh -c 'containerd config dump | grep -c "runtimes\.nvidia"')
			[[ $c == 6 ]] || {
				echo "run.sh: node $n: containerd config dump shows $c nvidia runtime lines, want 6" >&2
				bad=1
			}
		done
	fi
	return $bad
}

# ---------------------------------------------------------------------------------------------------
# remote processes: one untimed, instrumented run per tool and workload, with strace following the
# sshd of two nodes (a plain one and an omen-like one): every process sshd starts for the run
# (sshd's own per-connection processes included) is one pid in the trace.
declare -A PROCS
count_procs() {
	local wl=$1 tool=$2 key=${3:-$1-$2} n p t
	local -a tr=() sp=() lp=()
	local probe=("${NODES[0]}")
	((${#NODES[@]} >= 4)) && probe+=("${NODES[3]}")
	for n in "${probe[@]}"; do
		t=$W/strace-$wl-$tool-$n
		p=$(cat "$DIR/nodes/$n/sshd.pid")
		lp+=("$p")
		strace -f -qq -e trace=execve,connect,clone,clone3,fork,vfork -o "$t" -p "$p" &
		sp+=($!)
		tr+=("$t")
	done
	# strace prints nothing when attached; give it the time to attach before the run starts.
	sleep 1
	run_tool "$wl" "$tool" probe >/dev/null 2>&1
	sed -i '$d' "$TSV"
	kill "${sp[@]}"
	wait "${sp[@]}" 2>/dev/null || true
	local counts=() ctrd=() streams=() i
	for i in "${!tr[@]}"; do
		# pids other than the listener's that exec'd (as when only execve was traced: the threads
		# and forks the clone tracing below adds are not counted), and successful execs.
		counts+=("$(awk -v l="${lp[i]}" '$1 != l && /execve\(|execve resumed>/ {pid[$1]=1} /execve\(/ && / = 0$/ {e++} END {print length(pid) "/" e+0}' "${tr[i]}")")
		# Streams sshd itself opened to containerd's socket (OpenSSH direct-streamlocal, the CRI
		# client's connection: one more round trip each), told apart from the connections of the
		# ctr, crictl or containerd a script runs (and of their threads) by ancestry: a pid is a
		# tool's when it, or the process it was cloned from, exec'd anything but sshd.
		streams+=("$(awk '
			{ pid = $1 }
			/ (clone|clone3|fork|vfork)\(/ || /<\.\.\. (clone|clone3|fork|vfork) resumed>/ {
				if (match($0, /= [0-9]+$/)) parent[substr($0, RSTART + 2)] = pid
			}
			/ execve\(/ { if ($0 ~ /execve\("[^"]*\/sshd"/) sshd[pid] = 1; else tool[pid] = 1 }
			/ connect\(.*containerd\.sock"/ { c[pid]++ }
			function istool(p, k) {
				for (k = 0; p != "" && k < 64; k++) {
					if (p in tool) return 1
					if (p in sshd) return 0
					p = (p in parent) ? parent[p] : ""
				}
				return 0
			}
			END { n = 0; for (p in c) if (!istool(p)) n += c[p]; print n }' "${tr[i]}")")
		# containerd runs: successful execs of a binary named containerd with `config dump`
		# (live, staged or a --config candidate); the daemon the restart starts is not one. With
		# -f, strace may split an exec into "<unfinished ...>" and "<... execve resumed>" lines.
		ctrd+=("$(awk '
			/execve\("[^"]*\/containerd", \[.*"config", "dump"/ { if (/ = 0$/) c++; else if (/<unfinished \.\.\.>$/) pend[$1] = 1; next }
			/<\.\.\. execve resumed>/ && ($1 in pend) { if (/ = 0$/) c++; delete pend[$1] }
			END { print c + 0 }' "${tr[i]}")")
	done
	PROCS[$key]=${counts[*]}
	PROCS[$key:containerd]=${ctrd[*]}
	PROCS[$key:streams]=${streams[*]}
	log "remote processes/execs per host ($wl, $tool; ${probe[*]}): ${counts[*]}; containerd config dumps: ${ctrd[*]}; socket streams: ${streams[*]}"
}

# ---------------------------------------------------------------------------------------------------
# the workloads

HTML=${HTML:-1}
HTML_OUT=${HTML_OUT:-$here/results-html.md}
if [[ $HTML == only && -z $SCALE ]]; then
	cp "$MEASURE" "$W/measure"
	echo "# nodeconverge: the HTML report at fleet size ($(date -u +%F), nodeconverge $NC_REV)" >"$HTML_OUT"
	"$here/html.sh" "$DIR" "$W" "$NC" "$HTML_OUT"
	cat "$HTML_OUT"
	exit 0
fi

if [[ -n $NC_BASE ]]; then
	# The build against the base, nothing else: converge from the incident's state (the lab reset
	# before every run), then the no-change drift run on the nodes the last converge left.
	for ((r = 1; r <= RUNS; r++)); do
		if ((r % 2)); then order=(nodeconverge nodeconverge-base); else order=(nodeconverge-base nodeconverge); fi
		for t in "${order[@]}"; do
			"$here/reset.sh" "$DIR" incident
			containerd_pids >"$W/pids.before"
			run_tool converge "$t" "$r"
			if [[ $LAST_EXIT != 0 ]] || ! verify_converged "$W/pids.before"; then
				echo "run.sh: converge $t #$r exited $LAST_EXIT or left nodes unconverged; see $W/converge-$t-$r.out" >&2
				exit 1
			fi
		done
	done
	for ((r = 1; r <= RUNS; r++)); do
		if ((r % 2)); then order=(nodeconverge nodeconverge-base); else order=(nodeconverge-base nodeconverge); fi
		for t in "${order[@]}"; do
			run_tool drift "$t" "$r"
			[[ $LAST_EXIT == 0 ]] || {
				echo "run.sh: drift $t #$r exited $LAST_EXIT, want 0; see $W/drift-$t-$r.out" >&2
				exit 1
			}
		done
	done
	/usr/bin/python3 - "$TSV" "$N" "$RUNS" "$NC_REV" "$NC_SHA" "$NC_BASE_SHA" "$(nproc)" >"$OUT" <<'PY'
import csv, statistics, sys
tsv, n, runs, rev, sha, base_sha, cores = sys.argv[1:]
rows = list(csv.DictReader(open(tsv), delimiter="\t"))
print(f"# nodeconverge against its base build, {n} nodes, {runs} runs each (alternating), {cores} cores\n")
print(f"new: {rev} (sha256 {sha}); base: sha256 {base_sha}. Median of the runs; CPU is the controller's user+sys.\n")
print("| workload | build | wall s | CPU s | max RSS MB | sessions | new/base wall | new/base CPU |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for wl in ("converge", "drift"):
    med = {}
    for tool in ("nodeconverge", "nodeconverge-base"):
        rs = [r for r in rows if r["workload"] == wl and r["tool"] == tool]
        if rs:
            med[tool] = (statistics.median(float(r["wall_s"]) for r in rs),
                         statistics.median(float(r["user_s"]) + float(r["sys_s"]) for r in rs),
                         statistics.median(int(r["maxrss_kb"]) for r in rs) / 1024,
                         statistics.median(int(r["sess_total"]) for r in rs))
    for tool, label in (("nodeconverge", "new"), ("nodeconverge-base", "base")):
        if tool not in med:
            continue
        w, c, m, s = med[tool]
        ratio = ""
        if tool == "nodeconverge" and "nodeconverge-base" in med:
            bw, bc = med["nodeconverge-base"][:2]
            ratio = f"**{w / bw:.2f}x** | {c / bc:.2f}x"
        else:
            ratio = " | "
        print(f"| {wl} | {label} | {w:.2f} | {c:.2f} | {m:.1f} | {s:.0f} | {ratio} |")
print("\nRaw runs: runs.tsv in BENCH_WORK.")
PY
	cat "$OUT"
	log "wrote $OUT (raw runs: $TSV)"
	exit 0
fi

if [[ -n $SCALE ]]; then
	"$here/reset.sh" "$DIR" converged --no-restart
	((SMALL < N)) || SMALL=$N
	printf '%s\n' "${NODES[@]:0:SMALL}" >"$W/small.limit"
	for ((r = 1; r <= RUNS; r++)); do
		if ((r % 2)); then order=(nodeconverge nodeconverge-small); else order=(nodeconverge-small nodeconverge); fi
		for t in "${order[@]}"; do
			run_tool drift "$t" "$r"
			[[ $LAST_EXIT == 0 ]] || {
				echo "run.sh: drift run $t #$r exited $LAST_EXIT, want 0; see $W/drift-$t-$r.out" >&2
				exit 1
			}
		done
	done
	# Counted on the limited run: what a node runs does not depend on the fleet's size, and the
	# whole fleet under strace would take as long again as the timed run.
	count_procs drift nodeconverge-small drift-nodeconverge
	# Where the controller's CPU goes: one more drift run under perf (Go keeps frame pointers).
	if [[ -n ${PROFILE:-} ]] && command -v perf >/dev/null; then
		perf record -q -F 2999 -g -o "$W/perf.data" -- "$NC" "${NCARGS[@]}" --check "$W/nc.yaml" >/dev/null 2>&1 || true
		perf report -i "$W/perf.data" --no-children -g none --percent-limit 0.7 --sort sym --stdio 2>/dev/null |
			grep -v '^#' | grep -v '^$' >"$W/perf-top.txt" || true
		perf report -i "$W/perf.data" --children -g none --percent-limit 3 --sort sym --stdio 2>/dev/null |
			grep -v '^#' | grep -v '^$' >"$W/perf-children.txt" || true
		log "CPU profile: $W/perf-top.txt (self), $W/perf-children.txt (inclusive)"
	fi
else
	# (a) converge from the incident's state; the lab is reset before every run.
	for ((r = 1; r <= RUNS; r++)); do
		# Alternate who goes first, so neither always meets a machine the other just loaded.
		# nodeconverge-noprove: the same converge with the restart's proof off, side by side.
		if ((r % 2)); then order=(nodeconverge nodeconverge-noprove ansible floor); else order=(ansible nodeconverge-noprove nodeconverge floor); fi
		for t in "${order[@]}"; do
			"$here/reset.sh" "$DIR" incident
			containerd_pids >"$W/pids.before"
			run_tool converge "$t" "$r"
			[[ $LAST_EXIT == 0 ]] || {
				echo "run.sh: converge $t #$r exited $LAST_EXIT; see $W/converge-$t-$r.out" >&2
				exit 1
			}
			deep=""
			((r == 1)) && deep=deep
			verify_converged "$W/pids.before" $deep || {
				echo "run.sh: converge $t #$r left nodes unconverged; see $W/converge-$t-$r.out" >&2
				exit 1
			}
		done
	done
	# (b) no-change drift run on converged nodes. Start from Ansible's converge: its config.toml
	# (shipped whole) is the one both tools accept unchanged, byte for byte.
	"$here/reset.sh" "$DIR" incident
	ANSIBLE_SSH_CONTROL_PATH_DIR=$(mktemp -d "$W/cp.XXXX") "$AP" -i "$INV" "$W/ansible/gpu-containerd.yaml" >"$W/drift-baseline.out" 2>&1
	# (c) the proof by pod on the same converged nodes (`--check --prove`: a sandbox through every
	# runtime on every node), in the same rounds as the drift run, so the two are measured side by
	# side, against the floor doing the same with crictl. Each entry is WORKLOAD:TOOL.
	for ((r = 1; r <= RUNS; r++)); do
		if ((r % 2)); then
			order=(drift:nodeconverge prove:nodeconverge drift:ansible drift:floor prove:floor drift:ssh-true)
		else
			order=(drift:ansible prove:nodeconverge drift:nodeconverge prove:floor drift:floor drift:ssh-true)
		fi
		for e in "${order[@]}"; do
			wl=${e%%:*} t=${e#*:}
			run_tool "$wl" "$t" "$r"
			case $wl-$t in
			drift-nodeconverge) [[ $LAST_EXIT == 0 ]] || {
				echo "run.sh: nodeconverge --check found drift (exit $LAST_EXIT); see $W/drift-$t-$r.out" >&2
				exit 1
			} ;;
			drift-ansible) if [[ $LAST_EXIT != 0 ]] || grep -Eq 'changed=[1-9]|failed=[1-9]' "$W/drift-$t-$r.out"; then
				echo "run.sh: ansible --check found drift or failed; see $W/drift-$t-$r.out" >&2
				exit 1
			fi ;;
			*) [[ $LAST_EXIT == 0 ]] || {
				echo "run.sh: $wl $t #$r exited $LAST_EXIT; see $W/$wl-$t-$r.out" >&2
				exit 1
			} ;;
			esac
		done
	done
	for t in nodeconverge ansible floor ssh-true; do count_procs drift "$t"; done
	count_procs prove nodeconverge
	for t in nodeconverge nodeconverge-noprove ansible floor; do
		"$here/reset.sh" "$DIR" incident
		count_procs converge "$t"
	done
fi

# ---------------------------------------------------------------------------------------------------
# the table

procs_tsv=$W/procs.tsv
: >"$procs_tsv"
for k in "${!PROCS[@]}"; do printf '%s\t%s\n' "$k" "${PROCS[$k]}" >>"$procs_tsv"; done
mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
ans=$([[ -x $AP ]] && "$AP" --version 2>/dev/null | sed -n 1p || echo none)
machine="$(nproc) cores ($cpu), $mem, Linux $(uname -r)"
versions="$(go version 2>/dev/null | cut -d' ' -f3) · $ans · containerd $(containerd --version | cut -d' ' -f3) · $(ssh -V 2>&1 | cut -d, -f1) · nodeconverge $NC_REV at start (binary sha256 $NC_SHA)"
/usr/bin/python3 "$here/table.py" "$TSV" "$procs_tsv" "$N" "$RUNS" "$SERIAL" "${SCALE:+scale}" "$machine" "$versions" "$(date -u +%F)" "$FORKS" "$SMALL" "$PROOFS" >"$OUT"
cat "$OUT"
log "wrote $OUT (raw runs: $TSV; the lab is removed on exit)"
if [[ -z $SCALE && $HTML != 0 ]]; then
	cp "$MEASURE" "$W/measure"
	echo "# nodeconverge: the HTML report at fleet size ($(date -u +%F), nodeconverge $NC_REV)" >"$HTML_OUT"
	"$here/html.sh" "$DIR" "$W" "$NC" "$HTML_OUT"
	cat "$HTML_OUT"
	log "wrote $HTML_OUT"
fi
