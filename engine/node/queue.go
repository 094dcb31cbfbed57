package node

import (
	"context"
	"sync"

	"nodeconverge/engine/transport"
)

// Write-behind: a session costs a node more than the few writes it carries
// (sshd, a login shell, the script's reader, its private directory), and a
// converge writes a handful of files in as many tasks, each then followed by
// a command that has to run anyway (sysctl -p, the restart). ApplyLater
// queues a step's ops on the Host instead of sending them; the next Exec
// carries them ahead of its command in the same script, and an Apply ahead
// of its own ops. A Query or Stage the cache cannot answer, a lock's
// release and Flush send them on their own first: nothing ever reads the
// node as if a queued write had landed. A Rollback drops them: they never
// reached the node, so there is nothing of theirs to undo.
//
// The order on the node is the order of the calls, and an op that fails
// ends its script before anything after it runs (the command a queue rides
// on included), so a failure is the carrying call's error, naming the step
// that queued the op.

// writeQueue holds the ops ApplyLater accepted that no round trip has
// carried yet.
type writeQueue struct {
	mu  sync.Mutex
	ops []transport.Op
	// by names, per op, the step that queued it.
	by []string
}

// take empties the queue and returns what it held.
func (q *writeQueue) take() ([]transport.Op, []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ops, by := q.ops, q.by
	q.ops, q.by = nil, nil
	return ops, by
}

// putBack returns what take gave to a script that was never sent (it could
// not be built), ahead of anything queued since.
func (q *writeQueue) putBack(ops []transport.Op, by []string) {
	if len(ops) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ops = append(append([]transport.Op(nil), ops...), q.ops...)
	q.by = append(append([]string(nil), by...), q.by...)
}

// Later returns a Writer whose Apply is ApplyLater(by, ...) and whose every
// other call is the Host's: what the runner hands a step, so its writes
// wait for the host's next round trip.
func (h *Host) Later(by string) transport.Writer {
	return laterWriter{Writer: h, h: h, by: by}
}

// laterWriter is Later's Writer. It names the Host twice because embedding
// *Host would make its field Host hide the Host() method Writer needs.
type laterWriter struct {
	transport.Writer
	h  *Host
	by string
}

// Apply queues ops on the Host.
func (w laterWriter) Apply(_ context.Context, ops []transport.Op) ([]transport.OpResult, error) {
	return w.h.ApplyLater(w.by, ops)
}

// ApplyLater is Apply for ops that may wait for the Host's next round trip
// (see write-behind above): it checks them as Apply would, so a bad op is
// refused now, in the step that made it, queues them, and teaches the read
// cache their effect as if they were done. by names the step for messages
// ("task \"x\""). The results carry no backup paths: the node has not been
// asked yet.
func (h *Host) ApplyLater(by string, ops []transport.Op) ([]transport.OpResult, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	if err := h.opsBody(&script{}, ops); err != nil {
		return nil, err
	}
	h.queue.mu.Lock()
	for _, op := range ops {
		h.queue.ops = append(h.queue.ops, op)
		h.queue.by = append(h.queue.by, by)
	}
	h.queue.mu.Unlock()
	h.cache.wrote(ops)
	results := make([]transport.OpResult, len(ops))
	for i, op := range ops {
		results[i] = transport.OpResult{Path: op.Path}
	}
	return results, nil
}

// Queued says how many ops ApplyLater queued that no round trip carried yet.
func (h *Host) Queued() int {
	h.queue.mu.Lock()
	defer h.queue.mu.Unlock()
	return len(h.queue.ops)
}

// Flush sends the queued ops in a round trip of their own; with none queued
// it costs nothing.
func (h *Host) Flush(ctx context.Context) error {
	if h.Queued() == 0 {
		return nil
	}
	_, err := h.Apply(ctx, nil)
	return err
}

// DiscardQueued forgets the queued ops without sending them, for a run
// about to roll the host back (Rollback does it too, but a rollback over a
// fresh connection uses another Host): they never reached the node, and
// must not reach it after the rollback.
func (h *Host) DiscardQueued() {
	h.queue.take()
}
