package transport

import "context"

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
