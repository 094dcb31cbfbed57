package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
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
	h := NewHost(localconn.New("cache"), HostOptions{RunID: "r1", StateDir: filepath.Join(dir, "state")})
	q := transport.Query{Files: []string{f}, Globs: []string{filepath.Join(dir, "*.toml")}}
	s1, err := h.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	s1.Files[f] = &transport.FileInfo{Path: f} // what the overlay does to its copy
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
	st := transport.StageRequest{Files: map[string]transport.StagedFile{"x": {Content: []byte("x")}}, Cmds: []transport.Cmd{{Script: "cat x"}}}
	for i := 0; i < 2; i++ {
		if _, err := h.Stage(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Stats().RoundTrips; got != 2 {
		t.Fatalf("two identical stages cost %d round trips in all, want 2", got-1)
	}
	if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: f, Content: []byte("two")}}); err != nil {
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

// TestCacheLearnsWrites: after a successful Apply the written, created,
// moved and removed paths are answered from memory, glob matches included,
// and they agree with what the node really has.
func TestCacheLearnsWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.toml"), filepath.Join(dir, "b.toml")
	if err := os.WriteFile(a, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	h := NewHost(localconn.New("cache"), HostOptions{RunID: "r1", StateDir: filepath.Join(dir, "state")})
	q := transport.Query{Files: []string{a, b}, Globs: []string{filepath.Join(dir, "*.toml")}}
	if _, err := h.Query(ctx, q); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(dir, "moved", "a.toml")
	if _, err := h.Apply(ctx, []transport.Op{
		{Kind: transport.OpWrite, Path: b, Content: []byte("new")},
		{Kind: transport.OpWrite, Path: a, Content: []byte("two")},
		{Kind: transport.OpMove, From: a, Path: moved},
	}); err != nil {
		t.Fatal(err)
	}
	trips := h.Stats().RoundTrips
	q2 := transport.Query{Files: []string{a, b, moved}, Globs: []string{filepath.Join(dir, "*.toml")}}
	cached, err := h.Query(ctx, q2)
	if err != nil {
		t.Fatal(err)
	}
	if h.Stats().RoundTrips != trips {
		t.Fatal("the paths Apply wrote were read again")
	}
	h.Refresh()
	live, err := h.Query(ctx, q2)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range q2.Files {
		c, l := cached.File(p), live.File(p)
		if c.Exists != l.Exists || string(c.Content) != string(l.Content) || c.Exists && c.Mode.Perm() != l.Mode.Perm() {
			t.Errorf("%s: cache says exists=%v %q %v, node says exists=%v %q %v", p, c.Exists, c.Content, c.Mode, l.Exists, l.Content, l.Mode)
		}
	}
	g := q2.Globs[0]
	if strings.Join(cached.Globs[g], ",") != strings.Join(live.Globs[g], ",") {
		t.Errorf("glob: cache %v, node %v", cached.Globs[g], live.Globs[g])
	}
}

// TestCmdReadsDropOnWrite: a read-only command's result stays cached
// across Apply, unless its Reads names a path Apply changed (written,
// removed, or moved from or to, or a path below it: a write makes missing
// parents); then the next Query runs it again.
func TestCmdReadsDropOnWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	h := NewHost(localconn.New("reads"), HostOptions{RunID: "r1", StateDir: filepath.Join(dir, "state")})
	probe := func(p string) transport.Cmd {
		return transport.Cmd{Argv: []string{"ls", "-1", dir}, Reads: []string{p}}
	}
	plain := transport.Cmd{Argv: []string{"echo", "plain"}}
	q := transport.Query{Cmds: []transport.Cmd{probe(a), probe(c), plain}}
	if _, err := h.Query(ctx, q); err != nil {
		t.Fatal(err)
	}
	// b is read by no command: every result stays.
	if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: b, Content: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	trips := h.Stats().RoundTrips
	if _, err := h.Query(ctx, q); err != nil || h.Stats().RoundTrips != trips {
		t.Fatalf("a write to a path no command reads made a query go to the node (err %v)", err)
	}
	// Moving b to c changes what probe(c) reads, not a plain command.
	if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpMove, From: b, Path: c}}); err != nil {
		t.Fatal(err)
	}
	trips = h.Stats().RoundTrips
	if _, err := h.Query(ctx, transport.Query{Cmds: []transport.Cmd{probe(a), plain}}); err != nil || h.Stats().RoundTrips != trips {
		t.Fatalf("a move made unrelated commands run again (err %v)", err)
	}
	s, err := h.Query(ctx, transport.Query{Cmds: []transport.Cmd{probe(c)}})
	if err != nil {
		t.Fatal(err)
	}
	if h.Stats().RoundTrips != trips+1 || !strings.Contains(string(s.Cmds[0].Stdout), "c") {
		t.Fatalf("a command reading the moved-to path was answered from before the move: %q", s.Cmds[0].Stdout)
	}
	// A write below a read path (its parent directory made on the way).
	sub := filepath.Join(dir, "sub")
	if _, err := h.Query(ctx, transport.Query{Cmds: []transport.Cmd{probe(sub)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: filepath.Join(sub, "x"), Content: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	trips = h.Stats().RoundTrips
	if s, err = h.Query(ctx, transport.Query{Cmds: []transport.Cmd{probe(sub)}}); err != nil {
		t.Fatal(err)
	}
	if h.Stats().RoundTrips != trips+1 || !strings.Contains(string(s.Cmds[0].Stdout), "sub") {
		t.Fatalf("a command reading a directory a write made was answered from before it: %q", s.Cmds[0].Stdout)
	}
}

// TestStageUnitsShared: a staged unit is answered from an identical unit
// of an earlier request, whatever its place in the request, and identical
// units of one request run once; a unit with one byte changed runs. Each
// run appends to a log outside the scratch area, so the node says what ran.
func TestStageUnitsShared(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	log := filepath.Join(dir, "ran.log")
	h := NewHost(localconn.New("units"), HostOptions{RunID: "r1", StateDir: filepath.Join(dir, "state")})
	unit := func(content string) transport.StageUnit {
		return transport.StageUnit{Files: map[string]transport.StagedFile{"c.toml": {Content: []byte(content), Mode: 0o600}},
			Cmd: transport.Cmd{Script: "cat c.toml >>" + transport.ShellQuote(log) + "; echo >>" + transport.ShellQuote(log) + "; cat c.toml"}}
	}
	ran := func() []string {
		b, _ := os.ReadFile(log)
		_ = os.Remove(log)
		return strings.Fields(string(b))
	}
	res, err := h.Stage(ctx, transport.StageRequest{Cmds: []transport.Cmd{{Script: "echo plain"}}, Units: []transport.StageUnit{unit("a"), unit("b"), unit("a")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{string(res[0].Stdout), string(res[1].Stdout), string(res[2].Stdout), string(res[3].Stdout)}; strings.Join(got, ",") != "plain\n,a,b,a" {
		t.Fatalf("results out of order: %q", got)
	}
	if got := ran(); strings.Join(got, ",") != "a,b" {
		t.Fatalf("first request ran %q, want a and b once each", got)
	}
	// Another request: b is known (now at another index), c is new.
	res, err = h.Stage(ctx, transport.StageRequest{Units: []transport.StageUnit{unit("c"), unit("b")}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res[0].Stdout) != "c" || string(res[1].Stdout) != "b" {
		t.Fatalf("second request: %q %q", res[0].Stdout, res[1].Stdout)
	}
	if got := ran(); strings.Join(got, ",") != "c" {
		t.Fatalf("second request ran %q, want only the new unit c", got)
	}
	trips := h.Stats().RoundTrips
	if _, err := h.Stage(ctx, transport.StageRequest{Units: []transport.StageUnit{unit("a"), unit("c")}}); err != nil {
		t.Fatal(err)
	}
	if h.Stats().RoundTrips != trips || len(ran()) != 0 {
		t.Fatalf("a request of known units went to the node")
	}
	if r, u := h.StageCounts(); r != 3 || u != 3 {
		t.Fatalf("StageCounts = %d ran, %d reused; want 3, 3", r, u)
	}
	// A write keeps the proofs (they read only their own files); a
	// command that may change anything forgets them.
	if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: filepath.Join(dir, "f"), Content: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Stage(ctx, transport.StageRequest{Units: []transport.StageUnit{unit("a")}}); err != nil || len(ran()) != 0 {
		t.Fatalf("a write made a known unit run again (err %v)", err)
	}
	if _, err := h.Exec(ctx, transport.Cmd{Script: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Stage(ctx, transport.StageRequest{Units: []transport.StageUnit{unit("a")}}); err != nil {
		t.Fatal(err)
	}
	if got := ran(); strings.Join(got, ",") != "a" {
		t.Fatalf("after an Exec, a known unit ran %q, want once", got)
	}
}

// TestMemoSurvivesExec: an Exec that names what it touches keeps a Memo
// command's result (it depends on its program alone) unless the program is
// among the touched paths; plain command results go, and an Apply that
// replaces the program drops its memo.
func TestMemoSurvivesExec(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	prog := filepath.Join(dir, "tool")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho v1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := NewHost(localconn.New("memo"), HostOptions{RunID: "r1", StateDir: filepath.Join(dir, "state")})
	memo := transport.Query{Cmds: []transport.Cmd{{Argv: []string{prog, "--version"}, Memo: true}}}
	plain := transport.Query{Cmds: []transport.Cmd{{Argv: []string{"echo", "plain"}}}}
	for _, q := range []transport.Query{memo, plain} {
		if _, err := h.Query(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(dir, "other")
	if _, err := h.Exec(ctx, transport.Cmd{Argv: []string{"touch", other}, Touches: []string{other}}); err != nil {
		t.Fatal(err)
	}
	trips := h.Stats().RoundTrips
	if _, err := h.Query(ctx, memo); err != nil || h.Stats().RoundTrips != trips {
		t.Fatalf("an Exec that did not touch the program dropped its memo (err %v)", err)
	}
	if _, err := h.Query(ctx, plain); err != nil || h.Stats().RoundTrips != trips+1 {
		t.Fatalf("a plain command's result survived an Exec (err %v)", err)
	}
	// An Exec that touches the program drops the memo. (Each version has
	// its own size: the node's memo knows a program by its identity.)
	if _, err := h.Exec(ctx, transport.Cmd{Argv: []string{"sh", "-c", "printf '#!/bin/sh\\necho v22\\n' > " + prog}, Touches: []string{prog}}); err != nil {
		t.Fatal(err)
	}
	s, err := h.Query(ctx, memo)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.Cmds[0].Stdout); got != "v22\n" {
		t.Fatalf("after the program changed, memo answered %q", got)
	}
	// So does an Apply that replaces it.
	if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: prog, Content: []byte("#!/bin/sh\necho v333\n"), Mode: 0o755}}); err != nil {
		t.Fatal(err)
	}
	if s, err = h.Query(ctx, memo); err != nil {
		t.Fatal(err)
	}
	if got := string(s.Cmds[0].Stdout); got != "v333\n" {
		t.Fatalf("after an Apply replaced the program, memo answered %q", got)
	}
}
