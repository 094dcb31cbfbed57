// Package containerd_restart is the `containerd_restart` module, meant as a
// handler: it restarts containerd and then gates on health (unit active, CRI
// plugins ok, expected runtimes in the effective config). When a gate fails
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
	"nodeconverge/modules/containerd/health"
)

func init() { module.Register("containerd_restart", Module{}) }

// Args are the module's arguments.
type Args struct {
	Service    string   `yaml:"service" json:"service"`
	Config     string   `yaml:"config" json:"config"`
	Runtimes   []string `yaml:"runtimes" json:"runtimes"`
	Timeout    string   `yaml:"timeout" json:"timeout"`
	Containerd string   `yaml:"containerd" json:"containerd"`
	Ctr        string   `yaml:"ctr" json:"ctr"`
	Address    string   `yaml:"address" json:"address"`
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
	return nil
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

func (a *Args) gate() (health.Options, error) {
	t, err := a.timeout()
	if err != nil {
		return health.Options{}, err
	}
	return health.Options{Service: a.Service, Address: a.Address, Ctr: a.Ctr, Containerd: a.Containerd,
		Config: a.Config, Runtimes: a.Runtimes, Timeout: t}, nil
}

// Module implements module.Module for containerd_restart.
type Module struct{}

// NewArgs returns the defaults: the Debian paths and the runtimes the GPU
// Operator defines.
func (Module) NewArgs() module.Args {
	return &Args{Service: "containerd", Config: "/etc/containerd/config.toml",
		Runtimes: []string{"nvidia", "nvidia-cdi", "nvidia-legacy"}, Timeout: "60s",
		Containerd: "containerd", Ctr: "ctr", Address: "/run/containerd/containerd.sock"}
}

// Imperative tells the runner that a restart is an action, not a state: it
// runs only when notified (or owed) and is not re-checked afterwards.
func (Module) Imperative() bool { return true }

// Check always plans the restart: the runner only calls a handler when one
// is owed.
func (Module) Check(_ context.Context, _ transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode plan data: %w", err)
	}
	return &module.Plan{
		Restart:  []string{a.Service},
		Commands: []string{"systemctl restart " + a.Service},
		Notes:    []string{"then gates within " + a.Timeout + ": unit active, CRI plugins ok, runtimes " + strings.Join(a.Runtimes, ", ") + " in the effective config"},
		Data:     raw,
	}, nil
}

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
}

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
func round(ctx context.Context, h transport.Writer, a *Args) (*health.Report, error) {
	opts, err := a.gate()
	if err != nil {
		return nil, err
	}
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
	first, err := round(ctx, h, &a)
	if err != nil {
		return nil, err
	}
	if first.OK() {
		return &module.Result{Changed: true, Msg: "restarted " + a.Service + ", " + first.String()}, nil
	}
	ge := &GateError{Node: h.Host(), First: first.String()}
	ge.RolledBack, ge.RollbackErr = h.Rollback(ctx)
	second, err := round(ctx, h, &a)
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
