package ctrconf

import (
	"context"
	"sync/atomic"
	"testing"

	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
)

// localReader is the real transport (node.Host over a local sh, the
// same scripts an SSH node runs) with its Query and Stage calls counted, so
// tests hold the package to its round-trip budget.
type localReader struct {
	queries, stages atomic.Int32
	host            *node.Host
}

func newLocal(t testing.TB) *localReader {
	return &localReader{host: node.NewHost(localconn.New("local"), node.HostOptions{StateDir: t.TempDir()})}
}

func (l *localReader) Host() string { return l.host.Host() }

func (l *localReader) Query(ctx context.Context, q transport.Query) (*transport.Snapshot, error) {
	l.queries.Add(1)
	return l.host.Query(ctx, q)
}

func (l *localReader) Stage(ctx context.Context, r transport.StageRequest) ([]*transport.CmdResult, error) {
	l.stages.Add(1)
	return l.host.Stage(ctx, r)
}
