package transport

import (
	"context"
	"net"
)

// readOnly holds a Writer but exposes only the Reader methods. The field is
// unexported and not embedded, so neither a type assertion nor an interface
// upgrade can reach the write methods.
type readOnly struct {
	w Reader
}

// ReadOnly returns a Reader that exposes only the Reader methods of w: a type
// assertion of the result to Writer fails. This is how check mode is safe by
// construction rather than by every module remembering not to write.
func ReadOnly(w Writer) Reader {
	return readOnly{w: w}
}

func (r readOnly) Host() string { return r.w.Host() }

func (r readOnly) Query(ctx context.Context, q Query) (*Snapshot, error) {
	return r.w.Query(ctx, q)
}

func (r readOnly) Stage(ctx context.Context, s StageRequest) ([]*CmdResult, error) {
	return r.w.Stage(ctx, s)
}

// proveOnly holds a Writer but exposes only what a Prover may do: no Apply,
// no Rollback.
type proveOnly struct {
	w Writer
}

// ProveOnly returns a Prover over w for a check-mode proof: a type
// assertion of the result to Writer fails, so a proof cannot write a file
// through it.
func ProveOnly(w Writer) Prover {
	return proveOnly{w: w}
}

func (p proveOnly) Host() string { return p.w.Host() }

func (p proveOnly) Query(ctx context.Context, q Query) (*Snapshot, error) {
	return p.w.Query(ctx, q)
}

func (p proveOnly) Stage(ctx context.Context, s StageRequest) ([]*CmdResult, error) {
	return p.w.Stage(ctx, s)
}

func (p proveOnly) Exec(ctx context.Context, c Cmd) (*CmdResult, error) {
	return p.w.Exec(ctx, c)
}

func (p proveOnly) DialSocket(ctx context.Context, path string) (net.Conn, error) {
	return p.w.DialSocket(ctx, path)
}
