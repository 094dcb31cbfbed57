// Package health gates a containerd restart on what the workload needs, not
// on what `systemctl is-active` says: the unit is active, the CRI plugin (and
// on 2.x the io.containerd.cri.v1 runtime and images plugins) loaded with
// status ok, every runtime the play expects is in the effective
// configuration, and then the running daemon itself, asked over its CRI API
// (modules/containerd/cri), reports those runtimes loaded and starts a pod
// sandbox through each of them, and is still the same daemon at the end of
// the settle window. The incident's aftershock was a daemon that was
// "active" while its CRI plugin had failed with "too many open files"; its
// last lesson was that only a pod proves a runtime.
package health

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/cri"
	"nodeconverge/modules/containerd/ctrconf"
	"nodeconverge/modules/containerd/runtimeopts"
)

// Options say what to check and how long to wait.
type Options struct {
	Service    string   // systemd unit, e.g. containerd
	Address    string   // containerd socket
	Ctr        string   // ctr binary
	Containerd string   // containerd binary, for `config dump`
	Config     string   // main config file the daemon runs with
	Runtimes   []string // runtimes the play expects
	// BinaryNames, optional, is the BinaryName each expected runtime must
	// have as the daemon decodes its options.
	BinaryNames map[string]string
	Timeout     time.Duration // deadline for the unit and the CRI plugin
	// Prove says what the daemon's proof decides: ProveRequired (a proof
	// that fails or cannot be made fails the gate), ProveBestEffort (only
	// a failed proof fails it; unproven is reported), ProveOff (none).
	Prove string
	// Proof is the proof's own settings; Socket, Runtimes, SandboxImage and
	// DefaultRuntime are filled in by the gate.
	Proof cri.Options
}

// The proof modes.
const (
	ProveRequired   = "required"
	ProveBestEffort = "best-effort"
	ProveOff        = "off"
)

// Report is one gate round.
type Report struct {
	// UnitState is the last `systemctl is-active` answer.
	UnitState string `json:"unit_state"`
	// Plugins maps "TYPE ID" of the CRI plugins to their STATUS as `ctr
	// plugins ls` printed them last.
	Plugins map[string]string `json:"plugins,omitempty"`
	// PluginError is the error text `ctr plugins ls -d` gave for a CRI
	// plugin that did not load.
	PluginError string `json:"plugin_error,omitempty"`
	// Runtimes found in the effective config, and those missing.
	Runtimes        []string `json:"runtimes,omitempty"`
	MissingRuntimes []string `json:"missing_runtimes,omitempty"`
	// BinaryNames are the expected runtimes' BinaryName as the daemon's
	// version decodes their options (see runtimeopts).
	BinaryNames map[string]string `json:"binary_names,omitempty"`
	// Proof is the running daemon's proof over its CRI API: its view of
	// the runtimes, and a pod sandbox through each.
	Proof *cri.Report `json:"proof,omitempty"`
	// Failure says which gate failed and why; "" when all passed.
	Failure string `json:"failure,omitempty"`
	// Hint is advice for a known failure.
	Hint string `json:"hint,omitempty"`
	// Elapsed is the time from the restart command (containerd_restart)
	// or the gate's start to its verdict.
	Elapsed time.Duration `json:"elapsed"`
}

// OK reports whether every gate passed.
func (r *Report) OK() bool { return r != nil && r.Failure == "" }

// String is the report as one line for messages.
func (r *Report) String() string {
	if r == nil {
		return "no gate result"
	}
	if r.OK() {
		s := fmt.Sprintf("healthy after %s: unit %s; %s; runtimes %s present",
			r.Elapsed.Round(10*time.Millisecond), r.UnitState, r.plugins(), strings.Join(r.Runtimes, ", "))
		if r.Proof != nil {
			s += "; " + r.Proof.String()
		}
		return s
	}
	s := r.Failure
	if r.Hint != "" {
		s += " (hint: " + r.Hint + ")"
	}
	return s
}

func (r *Report) plugins() string {
	keys := make([]string, 0, len(r.Plugins))
	for k := range r.Plugins {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + r.Plugins[k]
	}
	if len(parts) == 0 {
		return "no CRI plugin listed"
	}
	return "CRI plugins: " + strings.Join(parts, ", ")
}

// pollScript waits, on the node, until the unit is active and the CRI rows
// of `ctr plugins ls` are all ok (exit 0), one of them is error or skip
// (exit 1: plugin loading is decided at daemon start, so it will not
// improve), or the deadline passes (exit 2). It prints the last unit state
// and CRI rows either way; on exit 1 it then prints detailLine and what
// `ctr plugins ls -d` says of the CRI plugins, which names the error. Only
// a failure pays for those two runs of ctr, and awk judges the rows, so a
// healthy restart costs one ctr, one awk and no grep.
const pollScript = `end=$(( $(date +%s) + $4 ))
state=
rows=
while :; do
	state=$(systemctl is-active "$1" 2>/dev/null)
	if [ "$state" = active ] && out=$("$3" --address "$2" --connect-timeout 1s plugins ls 2>&1); then
		# awk prints the CRI rows and exits 1 (one failed), 2 (none yet,
		# or one still loading) or 0 (all ok).
		rows=$(printf '%s\n' "$out" | awk '
			($1 == "io.containerd.grpc.v1" && $2 == "cri") || ($1 == "io.containerd.cri.v1" && ($2 == "runtime" || $2 == "images")) {
				print $1 " " $2 " " $NF; n++
				if ($NF == "error" || $NF == "skip") bad = 1; else if ($NF != "ok") wait = 1
			}
			END { exit bad ? 1 : (n == 0 || wait) ? 2 : 0 }')
		case $? in
		1)
			printf 'state=%s\n%s\n%s\n' "$state" "$rows" "` + detailLine + `"
			"$3" --address "$2" --connect-timeout 1s plugins ls -d id==cri 2>&1
			"$3" --address "$2" --connect-timeout 1s plugins ls -d type==io.containerd.cri.v1 2>&1
			exit 1
			;;
		0)
			printf 'state=%s\n%s\n' "$state" "$rows"
			exit 0
			;;
		esac
	fi
	if [ "$(date +%s)" -ge "$end" ]; then
		printf 'state=%s\n%s\n' "$state" "$rows"
		exit 2
	fi
	sleep 0.2
done`

// detailLine separates the gate's rows from the plugin details.
const detailLine = "--- ctr plugins ls -d ---"

// TooManyOpenFilesHint is the advice for the incident's aftershock.
const TooManyOpenFilesHint = "raise fs.inotify.max_user_instances (the incident needed 8192; the sysctl module sets it) and restart containerd"

// hintFor returns advice for a known plugin error, "" for others.
func hintFor(pluginErr string) string {
	if strings.Contains(strings.ToLower(pluginErr), "too many open files") {
		return TooManyOpenFilesHint
	}
	return ""
}

func gateSecs(o Options) int {
	secs := int(math.Ceil(o.Timeout.Seconds()))
	if secs < 1 {
		secs = 1
	}
	return secs
}

// Query is what Gate reads. A restart passes it as its Exec's Then, so the
// gate's reads ride on the restart's round trip.
func Query(o Options) transport.Query {
	// The same round trip reads the config tree (what ctrconf.Gather reads
	// on a conf.d layout), so the runtimes gate needs no round trip of its
	// own for it.
	tq := ctrconf.PrefetchQuery(o.Config, o.Containerd)
	return transport.Query{Files: tq.Files, Globs: tq.Globs, Cmds: append([]transport.Cmd{
		{Argv: []string{"sh", "-c", pollScript, "gate", o.Service, o.Address, o.Ctr, fmt.Sprint(gateSecs(o))}},
	}, tq.Cmds...)}
}

// Gate runs one gate round in one round trip: it polls the unit and the CRI
// plugins on the node until they pass, fail for good or the deadline
// passes, then reads the plugin error text and the effective config.
func Gate(ctx context.Context, h transport.Prover, o Options) (*Report, error) {
	start := time.Now()
	var sandboxImage, defaultRuntime string
	secs := gateSecs(o)
	snap, err := h.Query(ctx, Query(o))
	if err != nil {
		return nil, fmt.Errorf("health gates: %w", err)
	}
	r := &Report{Plugins: map[string]string{}}
	poll := snap.Cmds[0]
	rows, detail, _ := strings.Cut(string(poll.Stdout), "\n"+detailLine+"\n")
	for _, line := range strings.Split(strings.TrimSpace(rows), "\n") {
		if s, ok := strings.CutPrefix(line, "state="); ok {
			r.UnitState = s
			continue
		}
		if f := strings.Fields(line); len(f) == 3 {
			r.Plugins[f[0]+" "+f[1]] = f[2]
		}
	}
	if r.UnitState == "" {
		r.UnitState = "unknown"
	}
	switch poll.ExitCode {
	case 0:
	case 1:
		r.PluginError = pluginError(detail)
		r.Failure = fmt.Sprintf("CRI plugin did not load: %s", r.plugins())
		if r.PluginError != "" {
			r.Failure += ": " + r.PluginError
		}
		r.Hint = hintFor(r.PluginError)
	case 2:
		if r.UnitState != "active" {
			r.Failure = fmt.Sprintf("%s not active after %ds (last state %q)", o.Service, secs, r.UnitState)
		} else {
			r.Failure = fmt.Sprintf("CRI plugin not ok after %ds: %s", secs, r.plugins())
		}
	default:
		r.Failure = fmt.Sprintf("gate script exited %d: %s", poll.ExitCode, strings.TrimSpace(string(poll.Stderr)))
	}
	if r.Failure == "" {
		// The effective config is the node's containerd's dump of the
		// files as they are now. When the run already proved this very
		// tree (every file's content the same as a candidate it staged),
		// the transport answers with that proof instead of running
		// containerd again; any changed byte is dumped anew.
		eff, err := effective(ctx, h, o)
		if err != nil {
			return nil, fmt.Errorf("health gates: %w", err)
		}
		if eff.OK {
			sandboxImage, defaultRuntime = DumpFacts(eff.Raw)
		}
		if !eff.OK {
			r.Failure = fmt.Sprintf("%s --config %s config dump failed: %s", o.Containerd, o.Config, strings.TrimSpace(eff.Err))
		} else if r.Runtimes, err = runtimes(eff.Raw); err != nil {
			r.Failure = fmt.Sprintf("read the effective config: %v", err)
		} else {
			have := map[string]bool{}
			for _, n := range r.Runtimes {
				have[n] = true
			}
			for _, n := range o.Runtimes {
				if !have[n] {
					r.MissingRuntimes = append(r.MissingRuntimes, n)
				}
			}
			if len(r.MissingRuntimes) > 0 {
				r.Failure = fmt.Sprintf("runtimes %s missing from the effective config (it has %s)",
					strings.Join(r.MissingRuntimes, ", "), strings.Join(r.Runtimes, ", "))
			} else if bins, problems, err := binaryNames(eff.Raw, o.Runtimes, o.BinaryNames); err != nil {
				r.Failure = fmt.Sprintf("read the effective config: %v", err)
			} else {
				r.BinaryNames = bins
				if len(problems) > 0 {
					r.Failure = strings.Join(problems, "; ")
				}
			}
		}
	}
	if r.Failure == "" && o.Prove != ProveOff {
		r.Proof = Prove(ctx, h, o, sandboxImage, defaultRuntime)
		switch {
		case r.Proof.OK():
		case r.Proof.IsUnproven() && o.Prove == ProveBestEffort:
		case r.Proof.IsUnproven() && r.Proof.Via == "":
			// The socket could not be opened at all. A daemon that answered
			// the poll a moment ago and has died since closes its socket
			// too, and sshd says "open failed" for both: ask the unit, so
			// the failure names the death instead of blaming forwarding.
			if state, dead, qerr := daemonGone(ctx, h, o.Service); dead {
				r.UnitState = state
				r.Failure = fmt.Sprintf("%s is %s: the daemon died after it answered its health gates, before its proof could reach %s (%s)",
					o.Service, state, o.Address, r.Proof.String())
			} else {
				r.Failure = "the running containerd is not proved: " + r.Proof.String() +
					" (set prove: best-effort on the restart handler to accept an unproven restart)"
				if qerr != nil {
					r.Failure += fmt.Sprintf("; whether %s is still active could not be asked either: %v", o.Service, qerr)
				}
			}
		case r.Proof.IsUnproven():
			r.Failure = "the running containerd is not proved: " + r.Proof.String() +
				" (set prove: best-effort on the restart handler to accept an unproven restart)"
		default:
			r.Failure = "the running containerd failed its proof: " + r.Proof.String()
		}
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// deathCheck bounds daemonGone's one command: it runs after a proof that
// may have spent the gate's deadline.
const deathCheck = 15 * time.Second

// daemonGone asks the node whether the unit is still active (one command,
// its own short deadline). dead is true only when the node answered and
// the answer is not active: a node that cannot be asked proves nothing,
// and why it could not is returned for the failure to say.
func daemonGone(ctx context.Context, h transport.Prover, service string) (state string, dead bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deathCheck)
	defer cancel()
	res, err := h.Exec(ctx, transport.Cmd{Argv: []string{"systemctl", "is-active", service}})
	if err != nil {
		return "", false, fmt.Errorf("systemctl is-active %s: %w", service, err)
	}
	state = strings.TrimSpace(string(res.Stdout))
	if state == "" {
		return "", false, nil
	}
	return state, state != "active", nil
}

// Prove asks the running daemon over its CRI API (modules/containerd/cri)
// about the runtimes o expects, the sandbox image and default runtime as the
// config dump names them (the daemon's own answer wins where it gives one).
func Prove(ctx context.Context, h transport.Prover, o Options, sandboxImage, defaultRuntime string) *cri.Report {
	po := o.Proof
	po.Socket = o.Address
	po.Runtimes = o.Runtimes
	if po.SandboxImage == "" {
		po.SandboxImage = sandboxImage
	}
	if po.DefaultRuntime == "" {
		po.DefaultRuntime = defaultRuntime
	}
	return cri.Prove(ctx, h, po)
}

// ProveRunning proves the daemon as it runs now, with no restart (`apply
// --check --prove`): the config dump of the live tree (one the run already
// made answers from memory) names the sandbox image and default runtime.
func ProveRunning(ctx context.Context, h transport.Prover, o Options) (*cri.Report, error) {
	eff, err := effective(ctx, h, o)
	if err != nil {
		return nil, fmt.Errorf("prove the running containerd: %w", err)
	}
	var img, def string
	if eff.OK {
		img, def = DumpFacts(eff.Raw)
	}
	return Prove(ctx, h, o, img, def), nil
}

// DumpFacts reads the sandbox image and the default runtime out of a
// `config dump`: on 1.x from the CRI plugin, on 2.x the images plugin's
// pinned sandbox image and the runtime plugin's default.
func DumpFacts(dump []byte) (sandboxImage, defaultRuntime string) {
	var cfg map[string]any
	if err := toml.Unmarshal(dump, &cfg); err != nil {
		return "", ""
	}
	get := func(keys ...string) string {
		var node any = cfg
		for _, k := range keys {
			m, ok := node.(map[string]any)
			if !ok {
				return ""
			}
			node = m[k]
		}
		s, _ := node.(string)
		return s
	}
	if v, ok := cfg["version"].(int64); ok && v <= 2 {
		return get("plugins", "io.containerd.grpc.v1.cri", "sandbox_image"),
			get("plugins", "io.containerd.grpc.v1.cri", "containerd", "default_runtime_name")
	}
	return get("plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox"),
		get("plugins", "io.containerd.cri.v1.runtime", "containerd", "default_runtime_name")
}

// effective is containerd's dump of the config tree at o.Config as the node
// has it now, staged as every other dump of the run is (ctrconf).
func effective(ctx context.Context, h transport.Reader, o Options) (*ctrconf.Effective, error) {
	t, err := ctrconf.Gather(ctx, h, o.Config, o.Containerd)
	if err != nil {
		return nil, fmt.Errorf("read the containerd config: %w", err)
	}
	e, err := ctrconf.Dump(ctx, h, t, nil)
	if err != nil {
		return nil, fmt.Errorf("dump the containerd config: %w", err)
	}
	return e, nil
}

// pluginError picks the reason out of `ctr plugins ls -d`: the Message
// lines of its Error blocks.
func pluginError(out string) string {
	var msgs []string
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "Message:"); ok {
			if m = strings.TrimSpace(m); m != "" && !contains(msgs, m) {
				msgs = append(msgs, m)
			}
		}
	}
	return strings.Join(msgs, "; ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runtimes lists the CRI runtimes of a `config dump`: under
// io.containerd.grpc.v1.cri for config version 2 (containerd 1.x), under
// io.containerd.cri.v1.runtime for versions 3 and 4 (2.x).
func runtimes(dump []byte) ([]string, error) {
	var cfg map[string]any
	if err := toml.Unmarshal(dump, &cfg); err != nil {
		return nil, fmt.Errorf("parse config dump: %w", err)
	}
	plugin := "io.containerd.cri.v1.runtime"
	if v, ok := cfg["version"].(int64); ok && v <= 2 {
		plugin = "io.containerd.grpc.v1.cri"
	}
	node := any(cfg)
	for _, k := range []string{"plugins", plugin, "containerd", "runtimes"} {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, nil
		}
		if node, ok = m[k]; !ok {
			return nil, nil
		}
	}
	m, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("plugins.%q.containerd.runtimes is not a table", plugin)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// binaryNames reads the BinaryName of each expected runtime of a `config
// dump` as that daemon decodes the options: the dump's version says which
// generation printed it (1.x prints 2, 2.x prints 3 or 4). A runtime whose
// options spell BinaryName more than once with different values is a
// problem even when the decoded value looks right: the other generation
// decodes the other one (issue 10, defect 2). So is a decoded value other
// than want's.
func binaryNames(dump []byte, expected []string, want map[string]string) (map[string]string, []string, error) {
	var cfg map[string]any
	if err := toml.Unmarshal(dump, &cfg); err != nil {
		return nil, nil, fmt.Errorf("parse config dump: %w", err)
	}
	major, plugin := 2, "io.containerd.cri.v1.runtime"
	if v, ok := cfg["version"].(int64); ok && v <= 2 {
		major, plugin = 1, "io.containerd.grpc.v1.cri"
	}
	var node any = cfg
	for _, k := range []string{"plugins", plugin, "containerd", "runtimes"} {
		m, _ := node.(map[string]any)
		node = m[k]
	}
	rts, _ := node.(map[string]any)
	got := map[string]string{}
	var problems []string
	for _, n := range expected {
		rt, _ := rts[n].(map[string]any)
		opts, _ := rt["options"].(map[string]any)
		v, key, ok := runtimeopts.Decode(major, opts, "BinaryName")
		s, _ := v.(string)
		if ok {
			got[n] = s
		}
		var spellings []string
		values := map[string]bool{}
		for k, x := range opts {
			if strings.EqualFold(k, "BinaryName") {
				spellings = append(spellings, k)
				values[fmt.Sprint(x)] = true
			}
		}
		if len(values) > 1 {
			sort.Strings(spellings)
			problems = append(problems, fmt.Sprintf("runtime %s: options %s disagree; containerd %d.x decodes %s = %q", n, strings.Join(spellings, ", "), major, key, s))
		}
		if w := want[n]; w != "" && s != w {
			problems = append(problems, fmt.Sprintf("runtime %s: containerd %d.x decodes BinaryName = %q (option %q), want %q", n, major, s, key, w))
		}
	}
	return got, problems, nil
}
