// Package cri proves a node's running containerd the way the kubelet finds
// it: over its CRI API. It asks the daemon itself (verbose Status: the
// runtime conditions, the runtime handlers it loaded and their options), then
// starts a host-network pod sandbox through every runtime handler the play
// expects, waits for it to be READY, and stops and removes it. A handler that
// cannot start a sandbox fails, carrying the daemon's own error text.
//
// The incident's lesson was "verify with pods, not numbers": a config dump
// reads files, the daemon's answer is what it loaded, and a runtime handler
// is only consulted when a container is created. So this is the health that
// counts after a restart (modules/containerd/health) and in `apply --check
// --prove`.
//
// How the daemon is reached, in order:
//
//  1. its CRI socket through the host's own connection
//     (transport.Prover.DialSocket: over SSH an OpenSSH direct-streamlocal
//     channel, in pull mode the socket itself), spoken with k8s.io/cri-api's
//     generated client over gRPC, as the kubelet does; no protocol code of
//     our own;
//  2. where the socket cannot be opened (an sshd with
//     AllowStreamLocalForwarding no, a login user the socket refuses), the
//     node's crictl, the whole proof in one script;
//  3. where neither works, nothing is proved: every handler is "unproven"
//     with the reason, never proved.
//
// Every sandbox carries the labels LabelProof and LabelRun, and every proof
// starts by removing the sandboxes an earlier proof left (a run killed with
// SIGKILL mid-proof): nothing stays behind for longer than until the next
// proof on that node.
package cri

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"nodeconverge/engine/module"
)

// The labels every proof sandbox and container carries.
const (
	LabelProof   = "nodeconverge.io/proof"
	LabelRun     = "nodeconverge.io/run"
	LabelHandler = "nodeconverge.io/handler"
	// Namespace is the sandbox's metadata namespace (not a Kubernetes
	// namespace: no API server knows these sandboxes).
	Namespace = "nodeconverge-proof"
)

// Status is a handler's outcome.
type Status = module.ProofStatus

// The outcomes.
const (
	Proved   = module.ProofProved
	Failed   = module.ProofFailed
	Unproven = module.ProofUnproven
	Skipped  = module.ProofSkipped
)

// How the daemon was reached.
const (
	ViaSocket = "CRI over the connection's socket stream"
	ViaCrictl = "crictl on the node"
)

// Options say what to prove.
type Options struct {
	// Socket is containerd's socket on the node.
	Socket string
	// Runtimes are the handlers the play expects; the daemon's default
	// runtime is proved as well.
	Runtimes []string
	// SandboxImage is the sandbox image as the node's config dump says
	// (2.x does not report it in its CRI status); the daemon's own value
	// wins where it reports one (1.x).
	SandboxImage string
	// DefaultRuntime is the default runtime as the config dump says; the
	// daemon's own answer wins where it gives one.
	DefaultRuntime string
	// AllowPull lets the proof pull a missing sandbox image. Off by
	// default: a pull behind a broken registry config hides the cause.
	AllowPull bool
	// Crictl is the node's crictl for the fallback; "" disables it.
	Crictl string
	// RunID labels the sandboxes (LabelRun); Attempt tells the rounds of
	// one run apart (a sandbox name stays reserved until it is removed).
	RunID   string
	Attempt uint32
	// SweepAll removes every leftover proof sandbox of another run; without
	// it only those older than Timeout go (a check-mode proof takes no
	// node lock, so another proof may still be using a younger one). An
	// apply, which holds the node lock, sweeps all.
	SweepAll bool
	// Timeout bounds the whole proof (0: 60s).
	Timeout time.Duration
	// Settle is how long the daemon must stay the same process and keep
	// answering, counted from SettleFrom (the moment the restart's gate
	// saw its CRI plugin up); 0 checks nothing more.
	Settle     time.Duration
	SettleFrom time.Time
	// StatusOnly asks the daemon and starts no sandbox (explain).
	StatusOnly bool
	// AllLoaded proves every handler the daemon loaded as well (explain).
	AllLoaded bool
	// Workload, when set, also runs one container and judges its output.
	Workload *Workload
}

// Workload is the optional proof that a real container works through a
// handler: on a GPU node, `nvidia-smi -L` through nvidia with
// NVIDIA_VISIBLE_DEVICES=all, the toolkit's own validation.
type Workload struct {
	Runtime string            `yaml:"runtime" json:"runtime"`
	Image   string            `yaml:"image" json:"image"`
	Command []string          `yaml:"command" json:"command"`
	Env     map[string]string `yaml:"env" json:"env,omitempty"`
	// Expect is a regular expression the output must match.
	Expect string `yaml:"expect" json:"expect,omitempty"`
	// NeedsGPU skips the workload, saying so, on a node without an
	// NVIDIA GPU device (/dev/nvidia[0-9]*). Default true.
	NeedsGPU *bool `yaml:"needs_gpu" json:"needs_gpu,omitempty"`
	// Timeout bounds the container's run (default 60s).
	Timeout string `yaml:"timeout" json:"timeout,omitempty"`
}

// Condition is one runtime condition of the daemon's CRI status.
type Condition struct {
	Type    string `json:"type"`
	Status  bool   `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Handler is one runtime handler: as the daemon reports it, and the proof.
type Handler struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Loaded says the daemon's CRI status lists it; RuntimeType and
	// Options are its configuration as the daemon reports it.
	Loaded      bool           `json:"loaded"`
	RuntimeType string         `json:"runtime_type,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Sandbox     string         `json:"sandbox,omitempty"`
	Elapsed     time.Duration  `json:"elapsed_ns"`
}

// WorkloadResult is the workload proof's outcome.
type WorkloadResult struct {
	Runtime string        `json:"runtime"`
	Status  Status        `json:"status"`
	Reason  string        `json:"reason,omitempty"`
	Output  string        `json:"output,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Report is one proof of one node's daemon.
type Report struct {
	// Via says how the daemon was reached (ViaSocket, ViaCrictl); ""
	// when it could not be.
	Via string `json:"via,omitempty"`
	// Unproven says why the daemon could not be asked at all.
	Unproven string `json:"unproven,omitempty"`
	// Failure is a failure of the daemon as a whole (CRI not served, not
	// RuntimeReady, gone within the settle window, sandbox image missing).
	Failure string `json:"failure,omitempty"`
	// Version is the daemon's own "runtime_name runtime_version".
	Version        string      `json:"version,omitempty"`
	Conditions     []Condition `json:"conditions,omitempty"`
	DefaultRuntime string      `json:"default_runtime,omitempty"`
	SandboxImage   string      `json:"sandbox_image,omitempty"`
	// Loaded lists every handler the daemon reports, sorted.
	Loaded   []string        `json:"loaded,omitempty"`
	Handlers []*Handler      `json:"handlers,omitempty"`
	Workload *WorkloadResult `json:"workload,omitempty"`
	// Swept are sandboxes of earlier proofs this one removed.
	Swept []string `json:"swept,omitempty"`
	// Settled is the window the daemon was watched across.
	Settled time.Duration `json:"settled_ns,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`

	// config is the daemon's view of each handler it reported.
	config map[string]*Handler
}

// OK reports whether everything asked for was proved.
func (r *Report) OK() bool {
	if r == nil || r.Unproven != "" || r.Failure != "" {
		return false
	}
	for _, h := range r.Handlers {
		if h.Status != Proved {
			return false
		}
	}
	return r.Workload == nil || r.Workload.Status == Proved || r.Workload.Status == Skipped
}

// IsUnproven says the proof could not be made at all, or left a handler
// unproven, without anything failing.
func (r *Report) IsUnproven() bool {
	if r == nil {
		return true
	}
	if r.Failure != "" {
		return false
	}
	if r.Unproven != "" {
		return true
	}
	for _, h := range r.Handlers {
		if h.Status == Failed {
			return false
		}
	}
	for _, h := range r.Handlers {
		if h.Status == Unproven {
			return true
		}
	}
	return false
}

// Handler returns the named handler's result, or nil.
func (r *Report) Handler(name string) *Handler {
	for _, h := range r.Handlers {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// String is the proof as one line for messages.
func (r *Report) String() string {
	if r == nil {
		return "no proof"
	}
	var b strings.Builder
	switch {
	case r.Unproven != "":
		fmt.Fprintf(&b, "UNPROVEN: %s", r.Unproven)
		return b.String()
	case r.Failure != "":
		fmt.Fprintf(&b, "%s", r.Failure)
	}
	var proved, other []string
	for _, h := range r.Handlers {
		if r.Failure != "" && h.Reason == r.Failure {
			// Failed with the daemon, said once.
			continue
		}
		if h.Status == Proved {
			proved = append(proved, fmt.Sprintf("%s %s", h.Name, round(h.Elapsed)))
		} else {
			other = append(other, fmt.Sprintf("runtime %s %s: %s", h.Name, h.Status, h.Reason))
		}
	}
	if len(other) > 0 {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.Join(other, "; "))
	}
	if len(proved) > 0 {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "pod sandbox READY through %s", strings.Join(proved, ", "))
	}
	if w := r.Workload; w != nil {
		fmt.Fprintf(&b, "; workload through %s %s", w.Runtime, w.Status)
		if w.Reason != "" {
			fmt.Fprintf(&b, ": %s", w.Reason)
		}
		if w.Output != "" && w.Status == Proved {
			fmt.Fprintf(&b, ": %q", firstLine(w.Output))
		}
	}
	if r.Settled > 0 && r.Failure == "" {
		fmt.Fprintf(&b, "; daemon unchanged across %s", round(r.Settled))
	}
	if r.Via != "" {
		fmt.Fprintf(&b, " (%s)", r.Via)
	}
	if len(r.Swept) > 0 {
		fmt.Fprintf(&b, "; removed %d leftover proof sandbox(es) of an earlier run", len(r.Swept))
	}
	return b.String()
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// Proofs is the report as the plan's and the report's data: one proof per
// handler, and the workload's.
func (r *Report) Proofs() []module.Proof {
	if r == nil {
		return nil
	}
	var out []module.Proof
	if r.Unproven != "" && len(r.Handlers) == 0 {
		out = append(out, module.Proof{Kind: "daemon", Status: Unproven, Reason: r.Unproven})
	}
	if r.Failure != "" && len(r.Handlers) == 0 {
		out = append(out, module.Proof{Kind: "daemon", Status: Failed, Reason: r.Failure, Via: r.Via})
	}
	for _, h := range r.Handlers {
		p := module.Proof{Kind: "runtime", Name: h.Name, Status: h.Status, Reason: h.Reason, Via: r.Via,
			Duration: h.Elapsed, RuntimeType: h.RuntimeType, Loaded: h.Loaded}
		if len(h.Options) > 0 {
			keys := make([]string, 0, len(h.Options))
			for k := range h.Options {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			p.Options = map[string]string{}
			for _, k := range keys {
				p.Options[k] = fmt.Sprint(h.Options[k])
			}
		}
		if h.Status == Proved {
			p.Detail = fmt.Sprintf("pod sandbox READY, stopped and removed in %s", round(h.Elapsed))
		}
		out = append(out, p)
	}
	if w := r.Workload; w != nil {
		out = append(out, module.Proof{Kind: "workload", Name: w.Runtime, Status: w.Status, Reason: w.Reason,
			Output: w.Output, Via: r.Via, Duration: w.Elapsed})
	}
	return out
}

// expected is the handlers to prove: the play's, then the default runtime
// when it is not among them.
func expected(runtimes []string, def string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range append(append([]string(nil), runtimes...), def) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
