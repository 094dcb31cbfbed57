package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/transport"
)

// TestWriteBehind: ApplyLater's writes reach the node with the next Exec,
// ahead of its command and in its round trip; a read the cache cannot
// answer, a stage and a lock's release send them first; a rollback drops
// them; a queued write that fails ends the carrying script before its
// command, naming the step that queued it.
func TestWriteBehind(t *testing.T) {
	ctx := context.Background()
	for _, sh := range []string{"sh", "bash"} {
		t.Run(sh, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			a, b := filepath.Join(dir, "etc", "a.conf"), filepath.Join(dir, "b.conf")
			writeFile(t, b, []byte("old\n"), 0o644)
			h := newTestHost(t, sh, HostOptions{RunID: "r1", StateDir: state})
			write := func(p, content string) transport.Op {
				return transport.Op{Kind: transport.OpWrite, Path: p, Content: []byte(content), Mode: 0o644, Backup: true}
			}
			trips := func() int64 { return h.Stats().RoundTrips }

			// Queued: nothing on the node, no round trip, the cache knows.
			if _, err := h.ApplyLater(`task "one"`, []transport.Op{write(a, "A\n"), write(b, "B\n")}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(a); !errors.Is(err, os.ErrNotExist) || trips() != 0 || h.Queued() != 2 {
				t.Fatalf("after ApplyLater: stat %v, %d round trips, %d queued", err, trips(), h.Queued())
			}
			// The command sees the writes; one round trip for both.
			res, err := h.Exec(ctx, transport.Cmd{Argv: []string{"cat", a, b}, Touches: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res.Stdout); got != "A\nB\n" || trips() != 1 || h.Queued() != 0 {
				t.Fatalf("exec printed %q in %d round trips, %d still queued", got, trips(), h.Queued())
			}
			// They were written as Apply writes: backed up and recorded.
			if bk, err := os.ReadFile(filepath.Join(state, "backups", "r1", b)); err != nil || string(bk) != "old\n" {
				t.Errorf("backup of %s: %q, %v", b, bk, err)
			}
			if paths, err := h.Rollback(ctx); err != nil || len(paths) != 2 {
				t.Fatalf("rollback: %v, %v", paths, err)
			}
			if got, _ := os.ReadFile(b); string(got) != "old\n" {
				t.Fatalf("%s after rollback = %q", b, got)
			}

			// A Query the cache cannot answer reads the node as the
			// queued writes leave it.
			if _, err := h.ApplyLater(`task "two"`, []transport.Op{write(b, "two\n")}); err != nil {
				t.Fatal(err)
			}
			n := trips()
			snap, err := h.Query(ctx, transport.Query{Cmds: []transport.Cmd{{Argv: []string{"cat", b}}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(snap.Cmds[0].Stdout); got != "two\n" || trips() != n+2 {
				t.Errorf("query read %q in %d round trips, want the queued write in 2", got, trips()-n)
			}
			// So does a Stage (a validation may read live files).
			if _, err := h.ApplyLater(`task "three"`, []transport.Op{write(b, "three\n")}); err != nil {
				t.Fatal(err)
			}
			out, err := h.Stage(ctx, transport.StageRequest{Cmds: []transport.Cmd{{Argv: []string{"cat", b}}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(out[0].Stdout); got != "three\n" {
				t.Errorf("stage read %q, want the queued write", got)
			}

			// A rollback drops what is queued: it never reached the node.
			if _, err := h.ApplyLater(`task "four"`, []transport.Op{write(b, "four\n")}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(b); string(got) != "old\n" || h.Queued() != 0 {
				t.Errorf("after rollback %s = %q, %d queued", b, got, h.Queued())
			}
			n = trips()
			if err := h.Flush(ctx); err != nil || trips() != n {
				t.Errorf("an empty flush: %v, %d round trips", err, trips()-n)
			}

			// A queued write that fails: the command does not run, and
			// the error names the task that queued it.
			blocker := filepath.Join(dir, "blocker")
			writeFile(t, blocker, []byte("x"), 0o644)
			marker := filepath.Join(dir, "ran")
			if _, err := h.ApplyLater(`task "five"`, []transport.Op{write(filepath.Join(blocker, "c.conf"), "c\n")}); err != nil {
				t.Fatal(err)
			}
			_, err = h.Exec(ctx, transport.Cmd{Argv: []string{"touch", marker}, Touches: []string{marker}})
			var oe *OpError
			if err == nil || !errors.As(err, &oe) || !strings.Contains(err.Error(), `a change of task "five"`) {
				t.Fatalf("exec after a failing queued write: %v", err)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the command ran after its queued write failed: %v", err)
			}
			// A bad op is refused when it is queued, not later.
			if _, err := h.ApplyLater(`task "six"`, []transport.Op{{Kind: transport.OpWrite, Path: "relative"}}); err == nil || h.Queued() != 0 {
				t.Errorf("a relative path was queued (err %v)", err)
			}
			// A round trip that cannot be built is not sent, and its
			// queue waits for the next one.
			if _, err := h.ApplyLater(`task "seven"`, []transport.Op{write(b, "seven\n")}); err != nil {
				t.Fatal(err)
			}
			n = trips()
			if _, err := h.Exec(ctx, transport.Cmd{}); err == nil || trips() != n || h.Queued() != 1 {
				t.Errorf("an Exec with no command: err %v, %d round trips, %d queued", err, trips()-n, h.Queued())
			}
			if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: "relative"}}); err == nil || h.Queued() != 1 {
				t.Errorf("an Apply of a bad op: err %v, %d queued", err, h.Queued())
			}
			if err := h.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(b); string(got) != "seven\n" {
				t.Errorf("%s after the flush = %q", b, got)
			}
		})
	}
}

// TestWriteBehindRelease: a lock's release writes what is still queued
// while the lock is the run's.
func TestWriteBehindRelease(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.conf")
	h := newTestHost(t, "sh", HostOptions{RunID: "r1", StateDir: filepath.Join(dir, "state")})
	l, err := h.Lock(ctx, true, NewLockOwner("r1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ApplyLater(`task "one"`, []transport.Op{{Kind: transport.OpWrite, Path: p, Content: []byte("a\n")}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "a\n" {
		t.Errorf("%s after release: %q, %v", p, got, err)
	}
}
