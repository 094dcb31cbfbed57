"""Turn bench/run.sh's raw runs (runs.tsv) into the Markdown results table.

Usage: table.py RUNS_TSV PROCS_TSV N RUNS SERIAL MODE MACHINE VERSIONS DATE FORKS [SMALL]
(MODE is "scale" for the nodeconverge-only scale run, else empty.)
"""
import csv
import statistics
import sys

runs_tsv, procs_tsv, n, nruns, serial, mode, machine, versions, date, forks = sys.argv[1:11]
n = int(n)
small = int(sys.argv[11]) if len(sys.argv) > 11 else n
proofs_tsv = sys.argv[12] if len(sys.argv) > 12 else ""

rows = list(csv.DictReader(open(runs_tsv), delimiter="\t"))
procs = {}
for line in open(procs_tsv):
    k, v = line.rstrip("\n").split("\t", 1)
    procs[k] = v


def med(rs, f):
    return statistics.median(f(r) for r in rs)


def cpu(r):
    return float(r["user_s"]) + float(r["sys_s"])


def spread(rs, lo, hi, total):
    """Per-host figure of the runs: "k" when every host of every run had k, else min-max."""
    mn = min(int(r[lo]) for r in rs)
    mx = max(int(r[hi]) for r in rs)
    return str(mn) if mn == mx else f"{mn}–{mx}"


order = ["nodeconverge", "nodeconverge-noprove", "nodeconverge-small", "ansible", "floor", "ssh-true"]
hosts = {"nodeconverge-small": small}
label = {
    "nodeconverge": "nodeconverge" if mode != "scale" else f"nodeconverge, {n} hosts",
    "nodeconverge-small": f"nodeconverge, {small} hosts (`-l`)",
    "nodeconverge-noprove": "nodeconverge, restart's proof off (`prove: off`)",
    "ansible": "ansible-playbook",
    "floor": "floor (1 ssh/node, essential work)",
    "ssh-true": "`ssh node true`",
}
stats = {}
out = []
if mode == "scale":
    out.append(f"# nodeconverge at scale: no-change drift run on {n} nodes\n")
else:
    out.append(f"# Benchmark: nodeconverge vs ansible-playbook vs the floor, {n} nodes\n")
out.append(f"{date} · {machine}  \n{versions}  \n"
           f"{nruns} timed runs per tool and workload (medians shown); playbook serial: "
           f"{'as shipped (1)' if serial == 'shipped' else 'removed (all hosts at once)'}; "
           f"nodeconverge -f {forks}{'' if mode == 'scale' else f', Ansible forks = {n}'}. "
           "Method: bench/README.md.\n")
for wl in ["converge", "drift", "prove"]:
    wrs = [r for r in rows if r["workload"] == wl]
    if not wrs:
        continue
    title = {"converge": "Converge from the incident's broken state (lab reset before each run)",
             "drift": "No-change drift run (`--check`) on converged nodes",
             "prove": "Proof by pod (`--check --prove`) on converged nodes: a sandbox through every runtime"}[wl]
    out.append(f"\n## {title}\n")
    out.append("| tool | wall s | controller CPU s | CPU/host ms | peak RSS MB | TCP conn/host | SSH sessions/host | remote procs/host (execs) | containerd runs/node |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for t in order:
        rs = [r for r in wrs if r["tool"] == t]
        if not rs:
            continue
        w, c, m = med(rs, lambda r: float(r["wall_s"])), med(rs, cpu), med(rs, lambda r: int(r["maxrss_kb"]))
        stats[(wl, t)] = (w, c)
        p = procs.get(f"{wl}-{t}", "")
        p = " · ".join(p.split()) if p else "–"
        cr = procs.get(f"{wl}-{t}:containerd", "")
        cr = " · ".join(cr.split()) if cr else "–"
        out.append(f"| {label[t]} | {w:.2f} | {c:.2f} | {1000 * c / hosts.get(t, n):.1f} | {m / 1024:.0f} | "
                   f"{spread(rs, 'conn_min', 'conn_max', 'conn_total')} | "
                   f"{spread(rs, 'sess_min', 'sess_max', 'sess_total')} | {p} | {cr} |")
    ratios = []
    nc = stats.get((wl, "nodeconverge"))
    for t in ["ansible", "floor"]:
        o = stats.get((wl, t))
        if nc and o:
            ratios.append(f"nodeconverge/{label[t].split(' ')[0]}: wall **{nc[0] / o[0]:.2f}x**, CPU {nc[1] / o[1]:.2f}x")
    if ratios:
        out.append("\n" + "; ".join(ratios) + ".")

out.append("\nRemote procs: processes sshd started for one run on a plain node · an omen-like node "
           "(its config.toml has the nvidia block pasted twice), sshd's own per-connection processes "
           "included; in parentheses, successful execve calls. containerd runs: successful execs of "
           "`containerd ... config dump` (live, staged or candidate; not the daemon a restart starts) on "
           "the same two nodes. From an extra, untimed run under strace.")

if proofs_tsv:
    prs = list(csv.DictReader(open(proofs_tsv), delimiter="\t"))
    if prs:
        out.append("\n## Time per runtime handler (proof by pod: sandbox started, READY, stopped, removed)\n")
        out.append("| workload | runtime | proofs | proved | median s | max s |")
        out.append("| --- | --- | ---: | ---: | ---: | ---: |")
        for wl in ["converge", "prove"]:
            for rt in sorted({p["runtime"] for p in prs if p["workload"] == wl}):
                ps = [p for p in prs if p["workload"] == wl and p["runtime"] == rt]
                secs = [float(p["seconds"]) for p in ps]
                ok = sum(1 for p in ps if p["status"] == "proved")
                out.append(f"| {wl} | {rt} | {len(ps)} | {ok} | {statistics.median(secs):.2f} | {max(secs):.2f} |")
        out.append("\nThe runtimes of one node are proved at once over one stream to its containerd socket: "
                   "the node's proof takes about its slowest runtime, not their sum.")

# What the proof by pod costs a node: its round trips (SSH sessions, from every host's sshd log over
# every timed run, plus the streams sshd opened to containerd's socket for it, from the strace run)
# and wall time, each run with the proof against the same run without it, measured in the same rounds.
def rtrips(wl, tool):
    rs = [r for r in rows if r["workload"] == wl and r["tool"] == tool]
    if not rs:
        return None
    sess = max(int(r["sess_max"]) for r in rs)
    st = [int(x) for x in procs.get(f"{wl}-{tool}:streams", "").split()]
    return sess, (max(st) if st else None)


proof_extra = []
pairs = [("converge: the restart proves by pod (default) against `prove: off`", ("converge", "nodeconverge"), ("converge", "nodeconverge-noprove")),
         ("drift: `--check --prove` against `--check`", ("prove", "nodeconverge"), ("drift", "nodeconverge"))]
prows = []
for what, a, b in pairs:
    ra, rb = rtrips(*a), rtrips(*b)
    sa, sb = stats.get(a), stats.get(b)
    if not (ra and rb and sa and sb):
        continue
    ta = ra[0] + (ra[1] or 0)
    tb = rb[0] + (rb[1] or 0)
    known = ra[1] is not None and rb[1] is not None
    extra = ta - tb
    proof_extra.append((what.split(":")[0], extra, known))
    prows.append(f"| {what} | {sa[0]:.2f} s / {sb[0]:.2f} s = **{sa[0] / sb[0]:.2f}x** | {sa[1] / sb[1]:.2f}x | "
                 f"{ra[0]} / {rb[0]} | {ra[1] if ra[1] is not None else '?'} / {rb[1] if rb[1] is not None else '?'} | "
                 f"{ta} / {tb} | **{extra:+d}** |")
if prows:
    out.append("\n## What the proof by pod costs (with against without, same rounds)\n")
    out.append("| runs | wall (with / without) | controller CPU | SSH sessions/host | socket streams/node | round trips/node | extra |")
    out.append("| --- | --- | ---: | --- | --- | --- | ---: |")
    out.extend(prows)
    out.append("\nSSH sessions: the most any host had in any timed run (sshd logs). Socket streams: the "
               "direct-streamlocal channels sshd itself opened to containerd's socket (the proof's CRI "
               "client), the most of the two strace'd nodes; a script's own ctr or crictl is not counted. "
               "A round trip is one session or one stream.")
pf = stats.get(("prove", "floor"))
pv = stats.get(("prove", "nodeconverge"))
if pv and pf:
    out.append(f"\n`--check --prove` against the floor doing the same proof with crictl: wall **{pv[0] / pf[0]:.2f}x**.")

nc = stats.get(("drift", "nodeconverge"))
if nc:
    out.append("\n## Targets (issue 6)\n")
    out.append("| target | measured | met |")
    out.append("| --- | --- | --- |")
    rs = [r for r in rows if r["workload"] == "drift" and r["tool"] == "nodeconverge"]
    fl = stats.get(("drift", "floor"))
    an = stats.get(("drift", "ansible"))
    if fl:
        out.append(f"| drift wall ≤ 1.2x floor | {nc[0] / fl[0]:.2f}x | {'yes' if nc[0] / fl[0] <= 1.2 else 'no'} |")
    if an:
        out.append(f"| drift ≥ 6x ahead of Ansible | {an[0] / nc[0]:.1f}x | {'yes' if an[0] / nc[0] >= 6 else 'no'} |")
    cph = 1000 * nc[1] / n
    out.append(f"| controller CPU ≤ 10 ms/host (no-change) | {cph:.1f} ms | {'yes' if cph <= 10 else 'no'} |")
    cv, ca = stats.get(("converge", "nodeconverge")), stats.get(("converge", "ansible"))
    if cv and ca:
        out.append(f"| converge ≥ 5x faster than Ansible | {ca[0] / cv[0]:.1f}x | {'yes' if ca[0] / cv[0] >= 5 else 'no'} |")
    allnc = [r for r in rows if r["tool"] == "nodeconverge"]
    cmin, cmax = min(int(r["conn_min"]) for r in allnc), max(int(r["conn_max"]) for r in allnc)
    out.append(f"| exactly 1 TCP connection/host/run | {cmin}–{cmax} | {'yes' if cmin == cmax == 1 else 'no'} |")
    smax = max(int(r["sess_max"]) for r in rs)
    out.append(f"| ≤ 3 SSH sessions/host (no-change) | {smax} | {'yes' if smax <= 3 else 'no'} |")
    cf = stats.get(("converge", "floor"))
    if mode != "scale" and cv and cf:
        out.append("\n## Targets (issue 13)\n")
        out.append("| target | measured | met |")
        out.append("| --- | --- | --- |")
        out.append(f"| converge wall ≤ 1.5x floor | {cv[0] / cf[0]:.2f}x | {'yes' if cv[0] / cf[0] <= 1.5 else 'no'} |")
        if ca:
            out.append(f"| converge ≥ 5x faster than Ansible | {ca[0] / cv[0]:.1f}x | {'yes' if ca[0] / cv[0] >= 5 else 'no'} |")
        cr = [int(x) for x in procs.get("converge-nodeconverge:containerd", "").split()]
        if cr:
            out.append(f"| ≤ 4 containerd runs/node/converge (plain · omen-like) | {' · '.join(map(str, cr))} | "
                       f"{'yes' if max(cr) <= 4 else 'no'} |")
        if fl:
            out.append(f"| drift wall ≤ 1.1x floor | {nc[0] / fl[0]:.2f}x | {'yes' if nc[0] / fl[0] <= 1.1 else 'no'} |")
        out.append(f"| controller CPU ≤ 7 ms/host (no-change) | {cph:.1f} ms | {'yes' if cph <= 7 else 'no'} |")
    if proof_extra:
        out.append("\n## Targets (issue 26)\n")
        out.append("| target | measured | met |")
        out.append("| --- | --- | --- |")
        for what, extra, known in proof_extra:
            out.append(f"| the proof costs ≤ 1 extra round trip per node ({what}) | {extra:+d}{'' if known else ' (streams not counted)'} | "
                       f"{'yes' if extra <= 1 and known else 'no'} |")
        cn = stats.get(("converge", "nodeconverge-noprove"))
        if cv and cf:
            out.append(f"| converge, with the proof, still ≤ 1.5x floor (the floor proves with crictl) | {cv[0] / cf[0]:.2f}x | {'yes' if cv[0] / cf[0] <= 1.5 else 'no'} |")
        if fl:
            out.append(f"| drift (no `--prove`) still ≤ 1.1x floor | {nc[0] / fl[0]:.2f}x | {'yes' if nc[0] / fl[0] <= 1.1 else 'no'} |")
        if cn and cv:
            out.append(f"| converge without the proof (`prove: off`), for comparison | {cn[0]:.2f} s against {cv[0]:.2f} s | – |")
    if mode == "scale":
        rss = med(rs, lambda r: int(r["maxrss_kb"])) / 1024
        out.append(f"| {n} nodes: peak RSS < 150 MB | {rss:.0f} MB | {'yes' if rss < 150 else 'no'} |")
        srs = [r for r in rows if r["workload"] == "drift" and r["tool"] == "nodeconverge-small"]
        if srs and small < n:
            srss = med(srs, lambda r: int(r["maxrss_kb"])) / 1024
            out.append(f"| peak RSS at {n} hosts ≤ 1.3x at {small} (same -f {forks}; issue 13) | "
                       f"{rss:.0f} / {srss:.0f} MB = {rss / srss:.2f}x | {'yes' if rss / srss <= 1.3 else 'no'} |")
print("\n".join(out))
