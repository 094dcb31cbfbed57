package runner

import (
	"context"
	"errors"
	"fmt"
	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/transport"
	"strings"
	"time"
)

// owedWriter returns the Writer a notifying task applies through: its
// first write carries, in the same round trip and ahead of the task's own
// ops, the records that the task's handlers are owed. A run killed between
// the write and the handler is then finished by the next run instead of
// leaving the node on the old config.
func (r *runner) owedWriter(s *hostRun, t *playbook.Task, plan *module.Plan) (transport.Writer, error) {
	var bw transport.Writer = backupWriter{Writer: s.h.Later(fmt.Sprintf("task %q", t.Name)), stateDir: s.h.StateDir()}
	if t.Handler {
		if rec, ok := s.pending[t.Name]; ok && rec.RunID != "" && rec.RunID != r.o.RunID {
			return &owingWriter{Writer: bw, host: s.h, owing: rec.RunID}, nil
		}
		return bw, nil
	}
	if len(t.Notify) == 0 {
		return bw, nil
	}
	var ops []transport.Op
	for _, hn := range t.Notify {
		for _, f := range plan.Files {
			s.owed[hn] = append(s.owed[hn], f.Path)
		}
		// Owed again: the release must leave the new record.
		delete(s.clear, hn)
		op, err := node.PendingOp(s.h.StateDir(), node.PendingRecord{Handler: hn, RunID: r.o.RunID, Files: s.owed[hn], Since: time.Now().UTC()})
		if err != nil {
			return nil, fmt.Errorf("record pending handlers: %w", err)
		}
		ops = append(ops, op)
	}
	return &prependWriter{Writer: bw, ops: ops}, nil
}

// backupWriter keeps a backup of every live path a module changes, whether
// or not the module asked for one: a failure later in the run rolls the
// host back, and a path changed without a backup could not be restored.
type backupWriter struct {
	transport.Writer
	stateDir string
}

// Apply sets Backup on every op outside the state directory.
func (w backupWriter) Apply(ctx context.Context, ops []transport.Op) ([]transport.OpResult, error) {
	out := make([]transport.Op, len(ops))
	for i, op := range ops {
		if !strings.HasPrefix(op.Path, strings.TrimSuffix(w.stateDir, "/")+"/") {
			op.Backup = true
		}
		out[i] = op
	}
	return w.Writer.Apply(ctx, out)
}

// owingWriter is the Writer of a handler owed by an earlier run (killed
// between its write and the handler): a rollback the handler asks for (a
// restart whose gates fail) undoes this run and then the run that owes the
// restart, whose backups are still on the node. Without it, the owed
// restart of a killed run's bad change could only restart on that change.
type owingWriter struct {
	transport.Writer
	host  *node.Host
	owing string
	// restored are the paths the owing run's rollback restored.
	restored []string
	rolled   bool
}

// Rollback undoes this run, then the owing run (newest first), and returns
// every path either changed; both are attempted even when one fails.
func (w *owingWriter) Rollback(ctx context.Context) ([]string, error) {
	paths, err := w.Writer.Rollback(ctx)
	more, oerr := w.host.RollbackRun(ctx, w.owing)
	w.rolled, w.restored = true, more
	seen := map[string]bool{}
	for _, p := range paths {
		seen[p] = true
	}
	for _, p := range more {
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	if oerr != nil {
		oerr = fmt.Errorf("roll back run %s, which owed the restart: %w", w.owing, oerr)
	}
	return paths, errors.Join(err, oerr)
}

// prependWriter puts ops ahead of the first change a module makes.
type prependWriter struct {
	transport.Writer
	ops []transport.Op
}

// Apply performs the held ops and then the module's, in one round trip.
func (w *prependWriter) Apply(ctx context.Context, ops []transport.Op) ([]transport.OpResult, error) {
	n := len(w.ops)
	all := append(w.ops, ops...)
	w.ops = nil
	res, err := w.Writer.Apply(ctx, all)
	if len(res) >= n {
		res = res[n:]
	} else {
		res = nil
	}
	return res, err
}

// Exec first writes the held ops: a command may change the node too.
func (w *prependWriter) Exec(ctx context.Context, c transport.Cmd) (*transport.CmdResult, error) {
	if len(w.ops) > 0 {
		ops := w.ops
		w.ops = nil
		if _, err := w.Writer.Apply(ctx, ops); err != nil {
			return nil, fmt.Errorf("record pending handlers: %w", err)
		}
	}
	return w.Writer.Exec(ctx, c)
}
