package node

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"nodeconverge/engine/transport"
)

// Pending restarts.
//
// Before a run writes a file whose task notifies a handler, it records on the
// node that the handler is owed, as StateDir/pending/<handler>.json written
// with an ordinary Apply op (PendingOp, in the same Apply as the file or
// before it); a successful handler run clears it (ClearPendingOp). A later
// run reads the records with Host.Pending and runs the owed handlers even if
// it changes nothing. Records live under StateDir, so Rollback leaves them
// alone: a rolled-back node still owes nothing less than a restart.

// PendingRecord says a handler is owed on a node.
type PendingRecord struct {
	Handler string    `json:"handler"`
	RunID   string    `json:"run_id"`
	Files   []string  `json:"files"`
	Since   time.Time `json:"since"`
}

// PendingDir is where pending records live under a state directory.
func PendingDir(stateDir string) string { return path.Join(stateDir, "pending") }

// PendingPath returns the record path for handler: its name with every byte
// other than letters, digits, '_' and '-' written as %XX (so "restart
// containerd" is restart%20containerd.json), which keeps any handler name a
// single, non-hidden file name.
func PendingPath(stateDir, handler string) string {
	var b strings.Builder
	for i := 0; i < len(handler); i++ {
		c := handler[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return path.Join(PendingDir(stateDir), b.String()+".json")
}

// PendingOp is the Apply op that records rec on the node (mode 0600). When
// the same run records the same handler again, the Files are whatever rec
// says: the caller merges.
func PendingOp(stateDir string, rec PendingRecord) (transport.Op, error) {
	if rec.Handler == "" {
		return transport.Op{}, fmt.Errorf("pending record without a handler name")
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return transport.Op{}, fmt.Errorf("encode pending record for %q: %w", rec.Handler, err)
	}
	return transport.Op{Kind: transport.OpWrite, Path: PendingPath(stateDir, rec.Handler), Content: append(b, '\n'), Mode: 0o600}, nil
}

// ClearPendingOp is the Apply op that removes handler's record; removing a
// record that is not there succeeds.
func ClearPendingOp(stateDir, handler string) transport.Op {
	return transport.Op{Kind: transport.OpRemove, Path: PendingPath(stateDir, handler)}
}

// Pending reads every pending record on the node in one round trip, keyed by
// handler name. A record that does not parse is an error, not skipped: it
// stands for a restart someone owes.
func (h *Host) Pending(ctx context.Context) (map[string]PendingRecord, error) {
	glob := path.Join(PendingDir(h.opts.StateDir), "*.json")
	snap, err := h.Query(ctx, transport.Query{Globs: []string{glob}})
	if err != nil {
		return nil, fmt.Errorf("read pending records: %w", err)
	}
	out := map[string]PendingRecord{}
	matches := append([]string(nil), snap.Globs[glob]...)
	sort.Strings(matches)
	for _, p := range matches {
		fi := snap.File(p)
		if !fi.Exists || fi.IsDir {
			continue
		}
		var rec PendingRecord
		if err := json.Unmarshal(fi.Content, &rec); err != nil {
			return nil, fmt.Errorf("%s: pending record %s: %w", h.Host(), p, err)
		}
		if rec.Handler == "" {
			return nil, fmt.Errorf("%s: pending record %s names no handler", h.Host(), p)
		}
		out[rec.Handler] = rec
	}
	return out, nil
}
