// Package module holds the contract every converge module follows and the
// registry the playbook loader and runner look modules up in. This file is
// the two steps and the data they exchange; registration.go is everything
// else a module may state about itself, in one place.
//
// A module is two steps. Check reads the node through a transport.Reader,
// which cannot write, builds the whole desired state, validates candidates in
// a scratch directory with the node's own tools, and returns a Plan: data that
// says exactly what Apply would do. Apply receives a transport.Writer and the
// Plan and performs exactly that. After Apply the runner calls Check again; a
// plan that is still not empty is a failure ("did not converge").
package module

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"time"

	"nodeconverge/engine/transport"
)

// Args is a module's typed arguments: a pointer to a struct whose fields
// carry `yaml` tags. The playbook loader rejects keys the struct does not
// have, decodes the task's mapping into it after variables are substituted,
// and then calls Validate for rules a type cannot express.
type Args interface {
	Validate() error
}

// Module is one converge module.
type Module interface {
	// NewArgs returns a pointer to a zero Args with the module's defaults
	// set; the playbook is decoded over it.
	NewArgs() Args
	// Check reads the node and returns what Apply would do. It must not
	// change the node; h has no method that could.
	Check(ctx context.Context, h transport.Reader, args Args) (*Plan, error)
	// Apply performs exactly p and reports what changed.
	Apply(ctx context.Context, h transport.Writer, p *Plan) (*Result, error)
}

// Action is what a plan does to one path, a small closed set in the spirit of
// terraform's plans.Action.
type Action string

// The actions a FileChange can carry.
const (
	Create Action = "create"
	Update Action = "update"
	Delete Action = "delete"
	Move   Action = "move"
)

// FileChange is one planned change to a file on the node.
type FileChange struct {
	Action Action      `json:"action"`
	Path   string      `json:"path"`
	From   string      `json:"from,omitempty"` // for Move
	Before []byte      `json:"-"`
	After  []byte      `json:"-"`
	Mode   fs.FileMode `json:"mode,omitempty"`
	Owner  string      `json:"owner,omitempty"`
	Group  string      `json:"group,omitempty"`
	// BeforeHash fingerprints the live content the plan was made from
	// ("" when the file did not exist), so a saved plan can refuse a node
	// that changed since.
	BeforeHash string `json:"before_sha256,omitempty"`
	AfterHash  string `json:"after_sha256,omitempty"`
	// Reasons says why, beyond the content (mode, owner).
	Reasons []string `json:"reasons,omitempty"`
}

// EffectiveChange is one key of a daemon's effective configuration that the
// plan changes, as the daemon itself reported it for the live and the
// candidate tree.
type EffectiveChange struct {
	Key    string `json:"key"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	// DecidedBy says which loaded file decides the live value (Before):
	// the file that sets it, or, for a default, the file that put it back
	// (ctrconf.Tree.DecidedBy), so a report says where drift comes from.
	DecidedBy string `json:"decided_by,omitempty"`
}

// ZeroAfter reports whether the new value is its type's zero value (or the
// key goes away): the fields a newly loaded table brings along, which views
// count rather than list so the lines that matter stand out.
func (c EffectiveChange) ZeroAfter() bool {
	switch c.After {
	case "", `""`, "0", "0.0", "false", "[]", "{}":
		return true
	}
	return false
}

// Evidence records one validation: which command proved what, and how it
// ended. It is part of the plan so a reviewer sees why a write is safe.
type Evidence struct {
	What     string `json:"what"`
	Command  string `json:"command"`
	OK       bool   `json:"ok"`
	Output   string `json:"output,omitempty"`
	Required bool   `json:"required"`
}

// Plan is what Apply would do. It is data: the human output, --diff, the
// JSON report and the exit code are all views of it.
type Plan struct {
	Files     []FileChange      `json:"files,omitempty"`
	Effective []EffectiveChange `json:"effective,omitempty"`
	// Commands are mutating commands Apply would run (the command module).
	Commands []string `json:"commands,omitempty"`
	// Restart names services Apply would restart.
	Restart  []string   `json:"restart,omitempty"`
	Evidence []Evidence `json:"evidence,omitempty"`
	// Skip, when set, says why the module does nothing in this mode (for
	// example a command in check mode); the task is reported as skipped.
	Skip  string   `json:"skip,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// Drift names each declared value the node does not load now, with
	// the file that decides it: what a nightly check must say without -v.
	Drift []string `json:"drift,omitempty"`
	// Data is module-private state Apply needs beyond Files; it must
	// survive JSON so a saved plan can be applied later.
	Data json.RawMessage `json:"data,omitempty"`
	// Items and ItemValues are a loop task's per-item plans and its items.
	// They live with the plan in memory only: a loop's plan is applied in
	// the run that made it (--out refuses one).
	Items      []*Plan `json:"-"`
	ItemValues []any   `json:"-"`
	// Vars are Ansible's return values that the module knows when it
	// plans (stat's `stat`, service's `state`, lineinfile's `msg`): what
	// `register:` keeps besides changed/failed/skipped. They are on the
	// plan, not only on the Result, because check mode never applies, a
	// step whose plan is empty is never applied, and the up-front plan
	// decides a later `when: st.stat.exists` from them.
	Vars map[string]any `json:"vars,omitempty"`
	// Facts are variables the task sets on its host for the rest of the
	// run (set_fact): the runner adds them to the host's variables when
	// the task succeeds, above play and task vars, as Ansible does.
	Facts map[string]any `json:"facts,omitempty"`
	// Msg is what the task says to the operator (debug's message,
	// assert's verdict); views show it as the task's message.
	Msg string `json:"msg,omitempty"`
	// Always are commands Apply runs although they change nothing a
	// re-check could see (`systemctl daemon-reload`): they do not make
	// the task changed, as Ansible reports daemon_reload ok. Check mode
	// never runs them.
	Always []string `json:"always,omitempty"`
}

// Changed reports whether applying the plan would change anything.
func (p *Plan) Changed() bool {
	return p != nil && p.Skip == "" && (len(p.Files) > 0 || len(p.Commands) > 0 || len(p.Restart) > 0)
}

// ProofStatus is the outcome of one proof.
type ProofStatus string

// The outcomes of a proof.
const (
	ProofProved ProofStatus = "proved"
	ProofFailed ProofStatus = "failed"
	// ProofUnproven is a proof that could not be made (the daemon could
	// not be asked): never a pass.
	ProofUnproven ProofStatus = "unproven"
	// ProofSkipped is a proof that does not apply here, and says why (a
	// GPU workload on a node without a GPU).
	ProofSkipped ProofStatus = "skipped"
)

// Proof is one thing checked against the running node rather than its
// files: that a runtime handler starts a pod sandbox as the daemon itself
// reports it, the daemon as a whole, a workload's output. It is data like
// the rest of the plan, so every view (human text, JSON, Prometheus, HTML)
// shows the same proof.
type Proof struct {
	// Kind is "runtime" (a CRI runtime handler), "workload" or "daemon".
	Kind string `json:"kind"`
	// Name is the runtime handler's name ("" for the daemon).
	Name   string      `json:"name,omitempty"`
	Status ProofStatus `json:"status"`
	// Reason says why a proof failed, was unproven or skipped: for a
	// runtime, the daemon's own error text.
	Reason string `json:"reason,omitempty"`
	// Via is how the daemon was reached.
	Via string `json:"via,omitempty"`
	// Detail is what was proved, in words.
	Detail string `json:"detail,omitempty"`
	// Output is a workload's output.
	Output string `json:"output,omitempty"`
	// Loaded, RuntimeType and Options are the runtime as the daemon
	// reports it (its CRI status), not as files say.
	Loaded      bool              `json:"loaded,omitempty"`
	RuntimeType string            `json:"runtime_type,omitempty"`
	Options     map[string]string `json:"options,omitempty"`
	Duration    time.Duration     `json:"duration_ns"`
}

// Proven is implemented by an error that carries the proofs made before
// the failure (a restart whose proof failed), so the report shows them.
type Proven interface {
	error
	Proofs() []Proof
}

// ProveOptions say how much a Registration's Prove does beyond its arguments.
type ProveOptions struct {
	// StatusOnly asks the daemon what it runs and starts nothing
	// (`explain` without --prove): each runtime is reported with the
	// daemon's view of it and status skipped.
	StatusOnly bool
	// Loaded covers the runtimes the daemon loaded instead of those the
	// arguments name (`explain`, which has no play to expect any).
	Loaded bool
}

// Result is what Apply did.
type Result struct {
	Changed bool         `json:"changed"`
	Files   []FileChange `json:"files,omitempty"`
	Msg     string       `json:"msg,omitempty"`
	// Output is a command's output when the task is a command.
	Output string `json:"output,omitempty"`
	// RC, Stdout and Stderr are a command's exit status and output, kept
	// apart for `register:` (result.rc, result.stdout); RC is nil for a
	// module that ran no command. They are not part of the report.
	RC     *int   `json:"-"`
	Stdout string `json:"-"`
	Stderr string `json:"-"`
	// Items are a loop's results, one per item (nil for an item whose
	// plan changed nothing); ItemValues the items. For `register:`.
	Items      []*Result `json:"-"`
	ItemValues []any     `json:"-"`
	// Vars are return values known only after apply; they win over the
	// plan's Vars in what `register:` keeps.
	Vars map[string]any `json:"-"`
	// Proofs are what the module proved of the running node; the report
	// carries them on the task's result (report.TaskResult.Proofs).
	Proofs []Proof `json:"-"`
}

// Hash is the fingerprint used in plans: hex SHA-256, "" for nil.
func Hash(b []byte) string {
	if b == nil {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ValidationError is a failed validation of a candidate: the write was
// blocked and the node is unchanged. The runner reports it as a failed task
// with the evidence attached.
type ValidationError struct {
	Msg      string
	Evidence []Evidence
}

func (e *ValidationError) Error() string { return e.Msg }

// ApplyFiles performs a plan's file changes in one atomic transport step,
// every old file kept in the run's backup so a later failure can roll the
// host back; an existing file keeps its owner and mode unless the change
// names them. It is the whole Apply of a module whose plan is files only.
func ApplyFiles(ctx context.Context, h transport.Writer, p *Plan) (*Result, error) {
	if len(p.Files) == 0 {
		return nil, fmt.Errorf("plan has no file to write")
	}
	ops := make([]transport.Op, 0, len(p.Files))
	for _, fc := range p.Files {
		switch fc.Action {
		case Delete:
			ops = append(ops, transport.Op{Kind: transport.OpRemove, Path: fc.Path, Backup: true})
		case Move:
			ops = append(ops, transport.Op{Kind: transport.OpMove, From: fc.From, Path: fc.Path, Backup: true})
		default:
			ops = append(ops, transport.Op{Kind: transport.OpWrite, Path: fc.Path, Content: fc.After, Mode: fc.Mode, Owner: fc.Owner, Group: fc.Group, Backup: true})
		}
	}
	if _, err := h.Apply(ctx, ops); err != nil {
		return nil, fmt.Errorf("write %s: %w", p.Files[0].Path, err)
	}
	return &Result{Changed: true, Files: p.Files}, nil
}
