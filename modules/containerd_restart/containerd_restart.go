// Package containerd_restart is the `containerd_restart` module, meant as a
// handler: it restarts containerd and then gates on health (unit active, CRI
// plugins ok, expected runtimes in the effective config, and the proof by
// pod: the running daemon, asked over its CRI API, starts a pod sandbox
// through every runtime, and stays up across the settle window; see
// modules/containerd/health and modules/containerd/cri). When a gate fails
// it undoes every file this run changed on the node (the run manifest
// engine/node keeps; for a restart owed by an earlier run, that run's changes too:
// the runner hands it a Writer whose Rollback covers both), restarts again, gates again, and fails the host with both
// outcomes, so a bad change takes down one node, not the fleet.
package containerd_restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/cri"
	"nodeconverge/modules/containerd/health"
)

// A restart is an action, not a state: it runs only when notified (or owed)
// and is not re-checked afterwards (Imperative).
func init() {
	module.Register(module.Registration{Name: "containerd_restart", Module: Module{}, Imperative: true, Prove: Module{}.Prove, Restore: Module{}.Restore, Data: func() any { return new(Args) }})
}

// Args are the module's arguments.
type Args struct {
	Service    string   `yaml:"service" json:"service"`
	Config     string   `yaml:"config" json:"config"`
	Runtimes   []string `yaml:"runtimes" json:"runtimes"`
	Timeout    string   `yaml:"timeout" json:"timeout"`
	Containerd string   `yaml:"containerd" json:"containerd"`
	Ctr        string   `yaml:"ctr" json:"ctr"`
	Address    string   `yaml:"address" json:"address"`
	// Prove is what the proof by pod decides: required (default: a
	// runtime that cannot start a sandbox, or a daemon that cannot be
	// asked, fails the gate), best-effort (an unproven daemon is reported,
	// not failed), off (no proof; the gates before it only).
	Prove string `yaml:"prove" json:"prove"`
	// Crictl is the node's crictl, used when the connection cannot open
	// the containerd socket; "" disables the fallback.
	Crictl string `yaml:"crictl" json:"crictl"`
	// AllowPull lets the proof pull a sandbox image the node lacks.
	AllowPull bool `yaml:"allow_pull" json:"allow_pull,omitempty"`
	// Settle is how long the daemon must stay the same process and keep
	// answering after its CRI plugin came up ("0" disables).
	Settle string `yaml:"settle" json:"settle"`
	// Workload also runs one container through a handler and judges its
	// output (skipped, saying so, on a node without a GPU unless
	// needs_gpu: false).
	Workload *cri.Workload `yaml:"workload" json:"workload,omitempty"`
}

// Validate checks what a type cannot.
func (a *Args) Validate() error {
	for name, v := range map[string]string{"service": a.Service, "config": a.Config, "containerd": a.Containerd, "ctr": a.Ctr, "address": a.Address} {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%s must not be empty", name)
		}
	}
	for _, r := range a.Runtimes {
		if strings.TrimSpace(r) == "" {
			return errors.New("runtimes: empty runtime name")
		}
	}
	if _, err := a.timeout(); err != nil {
		return err
	}
	switch a.Prove {
	case "", health.ProveRequired, health.ProveBestEffort, health.ProveOff:
	default:
		return fmt.Errorf("prove %q: want required, best-effort or off", a.Prove)
	}
	if _, err := a.settle(); err != nil {
		return err
	}
	if a.Workload != nil {
		if err := a.Workload.Check(); err != nil {
			return err
		}
	}
	return nil
}

// settle reads "5s" or "0".
func (a *Args) settle() (time.Duration, error) {
	if a.Settle == "0" || a.Settle == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(a.Settle)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("settle %q is not a duration such as 5s (0 disables)", a.Settle)
	}
	return d, nil
}

// timeout reads "60s", "2m" or a plain number of seconds.
func (a *Args) timeout() (time.Duration, error) {
	if n, err := strconv.Atoi(a.Timeout); err == nil && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(a.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("timeout %q is not a positive duration such as 60s", a.Timeout)
	}
	return d, nil
}

// gate is the health gates' options for run runID.
func (a *Args) gate(runID string) (health.Options, error) {
	t, err := a.timeout()
	if err != nil {
		return health.Options{}, err
	}
	settle, err := a.settle()
	if err != nil {
		return health.Options{}, err
	}
	prove := a.Prove
	if prove == "" {
		prove = health.ProveRequired
	}
	return health.Options{Service: a.Service, Address: a.Address, Ctr: a.Ctr, Containerd: a.Containerd,
		Config: a.Config, Runtimes: a.Runtimes, Timeout: t, Prove: prove,
		Proof: cri.Options{Crictl: a.Crictl, AllowPull: a.AllowPull, RunID: runID, Timeout: t, Settle: settle, Workload: a.Workload}}, nil
}

// Module implements module.Module for containerd_restart.
type Module struct{}

// NewArgs returns the defaults: the Debian paths and the runtimes the GPU
// Operator defines.
func (Module) NewArgs() module.Args {
	return &Args{Service: "containerd", Config: "/etc/containerd/config.toml",
		Runtimes: []string{"nvidia", "nvidia-cdi", "nvidia-legacy"}, Timeout: "60s",
		Containerd: "containerd", Ctr: "ctr", Address: "/run/containerd/containerd.sock",
		Prove: health.ProveRequired, Crictl: "crictl", Settle: DefaultSettle}
}

// DefaultSettle is how long a restarted daemon must stay the same process
// and keep answering: a daemon that boots and dies a few seconds later (a
// plugin that fails on first use, a crash loop) must not leave the run
// healthy. The proof itself runs inside the window, so a healthy restart
// waits only what is left of it.
const DefaultSettle = "5s"

// Check always plans the restart: the runner only calls a handler when one
// is owed.
func (Module) Check(_ context.Context, _ transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode plan data: %w", err)
	}
	note := "then gates within " + a.Timeout + ": unit active, CRI plugins ok, runtimes " + strings.Join(a.Runtimes, ", ") + " in the effective config"
	if a.Prove != health.ProveOff {
		note += ", then the proof by pod: the daemon's CRI status, and a pod sandbox started and removed through each runtime and the default one"
		if s, _ := a.settle(); s > 0 {
			note += fmt.Sprintf(", the daemon unchanged across %s", s)
		}
	}
	return &module.Plan{
		Restart:  []string{a.Service},
		Commands: []string{"systemctl restart " + a.Service},
		Notes:    []string{note},
		Data:     raw,
	}, nil
}

// Prove proves the running daemon without restarting it (`apply --check
// --prove`): the same proof by pod as after a restart, with no settle
// window (nothing was restarted) and sweeping only leftovers older than a
// proof (a check holds no node lock). It writes no file.
func (Module) Prove(ctx context.Context, h transport.Prover, margs module.Args, po module.ProveOptions) ([]module.Proof, error) {
	a := margs.(*Args)
	opts, err := a.gate(proofRunID())
	if err != nil {
		return nil, err
	}
	opts.Proof.Settle = 0
	opts.Proof.StatusOnly = po.StatusOnly
	opts.Proof.AllLoaded = po.Loaded
	if po.Loaded {
		opts.Runtimes = nil
	}
	if po.StatusOnly {
		opts.Proof.Workload = nil
	}
	r, err := health.ProveRunning(ctx, h, opts)
	if err != nil {
		return nil, err
	}
	proofs := r.Proofs()
	switch {
	case r.OK():
		return proofs, nil
	case r.IsUnproven() && opts.Prove == health.ProveBestEffort:
		return proofs, nil
	case r.IsUnproven():
		return proofs, &ProofError{Msg: "the running containerd is not proved: " + r.String(), proofs: proofs}
	}
	return proofs, &ProofError{Msg: "the running containerd failed its proof: " + r.String(), proofs: proofs}
}

// proofRunID names a check-mode proof's sandboxes: check mode has no run
// id on the node (it writes no backup), so the time does.
func proofRunID() string { return "check-" + time.Now().UTC().Format("20060102T150405.000000000Z") }

// ProofError is a proof that failed or could not be made.
type ProofError struct {
	Msg    string
	proofs []module.Proof
}

func (e *ProofError) Error() string { return e.Msg }

// Proofs are the proofs made, for the report.
func (e *ProofError) Proofs() []module.Proof { return e.proofs }

var (
	_ module.Proven = (*ProofError)(nil)
	_ module.Proven = (*GateError)(nil)
)

// GateError is a restart whose gates failed: what failed, what was rolled
// back, and how the node came back on its previous files.
type GateError struct {
	Node string
	// First is the failed round after the restart.
	First string
	// RolledBack are the paths restored from the run's backup.
	RolledBack  []string
	RollbackErr error
	// Second is the round after restarting on the restored files.
	Second   string
	SecondOK bool
	// FirstProofs are the first round's proofs (what the change did).
	FirstProofs []module.Proof
}

// Proofs are the failed round's proofs, for the report.
func (e *GateError) Proofs() []module.Proof { return e.FirstProofs }

func (e *GateError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "containerd on %s failed its health gates after the restart: %s; ", e.Node, e.First)
	switch {
	case e.RollbackErr != nil:
		fmt.Fprintf(&b, "rollback failed: %v (restored %s); ", e.RollbackErr, list(e.RolledBack))
	default:
		fmt.Fprintf(&b, "rolled back %s; ", list(e.RolledBack))
	}
	if e.SecondOK {
		fmt.Fprintf(&b, "restarted on the previous files: %s", e.Second)
	} else {
		fmt.Fprintf(&b, "restarted on the previous files and still unhealthy: %s", e.Second)
	}
	return b.String()
}

// RolledBackPaths are the paths the gate's rollback restored, for the
// report's rolled_back.
func (e *GateError) RolledBackPaths() []string { return e.RolledBack }

func list(paths []string) string {
	if len(paths) == 0 {
		return "no files (no change was left to undo)"
	}
	return strings.Join(paths, ", ")
}

// round restarts the service and gates it; a restart that fails is the
// round's failure (gating a daemon that did not start would only wait out
// the deadline).
func round(ctx context.Context, h transport.Writer, a *Args, attempt int) (*health.Report, error) {
	opts, err := a.gate(h.RunID())
	if err != nil {
		return nil, err
	}
	// The run holds the node lock: every leftover of another run's proof
	// goes. A second round (after a rollback) names its sandboxes anew.
	opts.Proof.SweepAll = true
	opts.Proof.Attempt = uint32(attempt)
	// A restart changes the daemon, not a file the run read (Touches names
	// none): what the run read and proved of the config tree stays valid,
	// so the gate's dump of a tree the plan proved costs no containerd run.
	// The gate's reads follow a restart that succeeded in its round trip
	// (Then), so health.Gate finds them in the read cache.
	gq := health.Query(opts)
	start := time.Now()
	res, err := h.Exec(ctx, transport.Cmd{Argv: []string{"systemctl", "restart", a.Service}, Touches: []string{}, Then: &gq})
	if err != nil {
		return nil, fmt.Errorf("systemctl restart %s: %w", a.Service, err)
	}
	if !res.OK() {
		out := strings.TrimSpace(string(res.Stderr) + string(res.Stdout))
		return &health.Report{UnitState: "failed", Failure: fmt.Sprintf("systemctl restart %s exited %d: %s", a.Service, res.ExitCode, out)}, nil
	}
	// The settle window starts when the restart's round trip saw the CRI
	// plugin up (the poll ran in it).
	opts.Proof.SettleFrom = time.Now()
	r, err := health.Gate(ctx, h, opts)
	if r != nil {
		// The gate polled in the restart's round trip: its time is the
		// restart's, from the command on.
		r.Elapsed = time.Since(start)
	}
	return r, err
}

// Apply restarts and gates; on a failed gate it rolls the run back,
// restarts, gates again and returns a *GateError with both outcomes.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	var a Args
	if err := json.Unmarshal(p.Data, &a); err != nil {
		return nil, fmt.Errorf("decode plan data: %w", err)
	}
	first, err := round(ctx, h, &a, 0)
	if err != nil {
		return nil, err
	}
	if first.OK() {
		return &module.Result{Changed: true, Msg: "restarted " + a.Service + ", " + first.String(), Proofs: first.Proof.Proofs()}, nil
	}
	ge := &GateError{Node: h.Host(), First: first.String(), FirstProofs: first.Proof.Proofs()}
	ge.RolledBack, ge.RollbackErr = h.Rollback(ctx)
	second, err := round(ctx, h, &a, 1)
	if err != nil {
		ge.Second = err.Error()
		return nil, ge
	}
	ge.Second, ge.SecondOK = second.String(), second.OK()
	return nil, ge
}

// Restore starts the service after a restart was cut short (the run
// interrupted between its stop and its start) and reports the unit's
// state; it does not gate: the run is ending, and the next run owes the
// restart again (its pending record stays).
func (Module) Restore(ctx context.Context, h transport.Writer, p *module.Plan) (string, error) {
	var a Args
	if err := json.Unmarshal(p.Data, &a); err != nil {
		return "", fmt.Errorf("decode plan data: %w", err)
	}
	res, err := h.Exec(ctx, transport.Cmd{Argv: []string{"systemctl", "start", a.Service}})
	if err != nil {
		return "", fmt.Errorf("systemctl start %s: %w", a.Service, err)
	}
	if !res.OK() {
		return "", fmt.Errorf("systemctl start %s exited %d: %s", a.Service, res.ExitCode, strings.TrimSpace(string(res.Stderr)+string(res.Stdout)))
	}
	st, err := h.Exec(ctx, transport.Cmd{Argv: []string{"systemctl", "is-active", a.Service}})
	if err != nil {
		return "", fmt.Errorf("systemctl is-active %s: %w", a.Service, err)
	}
	return a.Service + " " + strings.TrimSpace(string(st.Stdout)), nil
}
