package runner

import (
	"context"
	"sort"
	"sync"

	"nodeconverge/engine/module"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
)

// readRecorder sits under check mode's overlay and fingerprints every
// file and glob the host's plan was made from, as the live node answered:
// a saved plan verifies all of them, not only the files it writes, since
// its proof (a containerd config dump of the whole tree, say) was made on
// them. The first answer for a path speaks for the node.
type readRecorder struct {
	r     transport.Reader
	mu    sync.Mutex
	files map[string]string
	globs map[string][]string
}

func newReadRecorder(r transport.Reader) *readRecorder {
	return &readRecorder{r: r, files: map[string]string{}, globs: map[string][]string{}}
}

// Host names the node.
func (rr *readRecorder) Host() string { return rr.r.Host() }

// Stage passes through: staged contents come from recorded Queries.
func (rr *readRecorder) Stage(ctx context.Context, req transport.StageRequest) ([]*transport.CmdResult, error) {
	return rr.r.Stage(ctx, req)
}

// Query asks the node and records what it answered.
func (rr *readRecorder) Query(ctx context.Context, q transport.Query) (*transport.Snapshot, error) {
	snap, err := rr.r.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	see := func(p string) {
		if _, ok := rr.files[p]; !ok {
			rr.files[p] = fingerprint(snap.File(p))
		}
	}
	for _, p := range q.Files {
		see(p)
	}
	for _, g := range q.Globs {
		if _, ok := rr.globs[g]; !ok {
			rr.globs[g] = append([]string{}, snap.Globs[g]...)
		}
		for _, p := range snap.Globs[g] {
			see(p)
		}
	}
	return snap, nil
}

// reads returns a copy of what was recorded: each path's fingerprint,
// each glob's matches.
func (rr *readRecorder) reads() (map[string]string, map[string][]string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	files, globs := make(map[string]string, len(rr.files)), make(map[string][]string, len(rr.globs))
	for p, h := range rr.files {
		files[p] = h
	}
	for g, m := range rr.globs {
		globs[g] = append([]string{}, m...)
	}
	return files, globs
}

// fingerprint is what a saved plan compares for one path: the content's
// hash, "" when absent, report.ReadDir for a directory.
func fingerprint(f *transport.FileInfo) string {
	switch {
	case !f.Exists:
		return ""
	case f.IsDir:
		return report.ReadDir
	}
	return module.Hash(f.Content)
}

// sortedMatches is a glob's matches in the order the node sorts them, for
// comparison.
func sortedMatches(m []string) []string {
	out := append([]string{}, m...)
	sort.Strings(out)
	return out
}
