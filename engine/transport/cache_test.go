package transport

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestReadCache: a repeated Query or Stage costs no round trip until the
// run writes; the overlay-style mutation of a returned snapshot does not
// leak into the cache.
func TestReadCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := filepath.Join(dir, "a.toml")
	if err := os.WriteFile(f, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := NewHost(NewLocal("cache"), HostOptions{RunID: "r1", StateDir: filepath.Join(dir, "state")})
	q := Query{Files: []string{f}, Globs: []string{filepath.Join(dir, "*.toml")}}
	s1, err := h.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	s1.Files[f] = &FileInfo{Path: f} // what the overlay does to its copy
	s1.Globs[q.Globs[0]] = nil
	s2, err := h.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Stats().RoundTrips; got != 1 {
		t.Fatalf("two identical queries cost %d round trips, want 1", got)
	}
	if string(s2.File(f).Content) != "one" || len(s2.Globs[q.Globs[0]]) != 1 {
		t.Fatalf("cached snapshot was changed through a returned copy: %+v", s2)
	}
	st := StageRequest{Files: map[string]StagedFile{"x": {Content: []byte("x")}}, Cmds: []Cmd{{Script: "cat x"}}}
	for i := 0; i < 2; i++ {
		if _, err := h.Stage(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Stats().RoundTrips; got != 2 {
		t.Fatalf("two identical stages cost %d round trips in all, want 2", got-1)
	}
	if _, err := h.Apply(ctx, []Op{{Kind: OpWrite, Path: f, Content: []byte("two")}}); err != nil {
		t.Fatal(err)
	}
	s3, err := h.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if string(s3.File(f).Content) != "two" {
		t.Fatalf("a write did not invalidate the cache: %q", s3.File(f).Content)
	}
}
