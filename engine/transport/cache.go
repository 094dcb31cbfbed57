package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// readCache remembers the answers of Query and Stage within one run, until
// the run writes to the node (Apply, Exec, Rollback clear it). Several
// modules of one play read the same containerd tree and dump the same live
// config; with the cache that costs one round trip per host, not one per
// task. What the node's files hold can only change under the run through
// another writer, which the node lock keeps out.
type readCache struct {
	mu      sync.Mutex
	queries map[string]*Snapshot
	stages  map[string][]*CmdResult
	hits    int64
}

func (c *readCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries, c.stages = nil, nil
}

func key(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// stageKey fingerprints a StageRequest; map order does not matter.
func stageKey(r StageRequest) (string, error) {
	names := make([]string, 0, len(r.Files))
	for n := range r.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	type file struct {
		Name    string
		Content []byte
		Mode    uint32
	}
	files := make([]file, len(names))
	for i, n := range names {
		files[i] = file{n, r.Files[n].Content, uint32(r.Files[n].Mode)}
	}
	return key(struct {
		Files []file
		Cmds  []Cmd
	}{files, r.Cmds})
}

// copySnapshot gives each caller its own maps: the check-mode overlay lays
// planned files over a snapshot and must not change the cached one.
func copySnapshot(s *Snapshot) *Snapshot {
	c := &Snapshot{
		Files: make(map[string]*FileInfo, len(s.Files)),
		Globs: make(map[string][]string, len(s.Globs)),
		Cmds:  append([]*CmdResult(nil), s.Cmds...),
	}
	for k, v := range s.Files {
		c.Files[k] = v
	}
	for k, v := range s.Globs {
		c.Globs[k] = append([]string(nil), v...)
	}
	return c
}

// Query reads files, expands globs and runs read-only commands in one round
// trip, or answers from what this run already read; see query.
func (h *Host) Query(ctx context.Context, q Query) (*Snapshot, error) {
	k, err := key(q)
	if err != nil {
		return nil, fmt.Errorf("%s: query: %w", h.Host(), err)
	}
	h.cache.mu.Lock()
	if s, ok := h.cache.queries[k]; ok {
		h.cache.hits++
		h.cache.mu.Unlock()
		return copySnapshot(s), nil
	}
	h.cache.mu.Unlock()
	s, err := h.query(ctx, q)
	if err != nil {
		return nil, err
	}
	h.cache.mu.Lock()
	if h.cache.queries == nil {
		h.cache.queries = map[string]*Snapshot{}
	}
	h.cache.queries[k] = copySnapshot(s)
	h.cache.mu.Unlock()
	return s, nil
}

// Stage validates candidates in a scratch directory in one round trip, or
// answers from an identical request of this run; see stage.
func (h *Host) Stage(ctx context.Context, r StageRequest) ([]*CmdResult, error) {
	k, err := stageKey(r)
	if err != nil {
		return nil, fmt.Errorf("%s: stage: %w", h.Host(), err)
	}
	h.cache.mu.Lock()
	if res, ok := h.cache.stages[k]; ok {
		h.cache.hits++
		h.cache.mu.Unlock()
		return append([]*CmdResult(nil), res...), nil
	}
	h.cache.mu.Unlock()
	res, err := h.stage(ctx, r)
	if err != nil {
		return nil, err
	}
	h.cache.mu.Lock()
	if h.cache.stages == nil {
		h.cache.stages = map[string][]*CmdResult{}
	}
	h.cache.stages[k] = append([]*CmdResult(nil), res...)
	h.cache.mu.Unlock()
	return res, nil
}
