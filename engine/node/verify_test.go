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

// TestWriteBehindReadBack (issue 27 item 4): when queued writes travel, the
// same round trip reads back what the node holds. A node that holds what
// was written passes in that one round trip; one whose file is not what
// was written (a stand-in sha256sum, first on PATH, answers as a file
// changed under the write would) fails the carrying step naming the path,
// both hashes and the task whose write it was, and the command the queue
// rode on does not run.
func TestWriteBehindReadBack(t *testing.T) {
	ctx := context.Background()
	for _, sh := range []string{"sh", "bash"} {
		t.Run(sh, func(t *testing.T) {
			dir := t.TempDir()
			a, gone, marker := filepath.Join(dir, "a.conf"), filepath.Join(dir, "gone.conf"), filepath.Join(dir, "ran")
			writeFile(t, gone, []byte("x\n"), 0o644)
			h := newTestHost(t, sh, HostOptions{RunID: "r1", StateDir: filepath.Join(dir, "state")})
			write := transport.Op{Kind: transport.OpWrite, Path: a, Content: []byte("A\n"), Mode: 0o644, Backup: true}
			remove := transport.Op{Kind: transport.OpRemove, Path: gone, Backup: true}
			run := transport.Cmd{Argv: []string{"touch", marker}, Touches: []string{}}

			if _, err := h.ApplyLater(`task "one"`, []transport.Op{write, remove}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Exec(ctx, run); err != nil {
				t.Fatalf("a node that holds what was written: %v", err)
			}
			if h.Stats().RoundTrips != 1 {
				t.Errorf("%d round trips, want the read-back in the carrying one", h.Stats().RoundTrips)
			}
			if err := os.Remove(marker); err != nil {
				t.Fatal(err)
			}

			// The stand-in answers for a.conf with another file's hash.
			bin := filepath.Join(dir, "bin")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(bin, "sha256sum"), []byte("#!/bin/sh\nshift\nfor f; do printf '%064d  %s\\n' 0 \"$f\"; done\n"), 0o755)
			t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
			write.Content = []byte("A2\n")
			if _, err := h.ApplyLater(`task "two"`, []transport.Op{write}); err != nil {
				t.Fatal(err)
			}
			_, err := h.Exec(ctx, run)
			if err == nil || !strings.Contains(err.Error(), "the node does not hold what was written") ||
				!strings.Contains(err.Error(), a+" holds sha256:000000000000, not the sha256:") || !strings.Contains(err.Error(), `a change of task "two"`) {
				t.Fatalf("Exec = %v, want the read-back's difference naming the path and the task", err)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the command ran on files that are not what was written: %v", err)
			}

			// A path a remove left in place is named with the task
			// whose remove it was.
			exp := expectations([]transport.Op{remove}, "")
			if err := verifyError(exp, []string{`task "three"`}, gone+": present"); err == nil ||
				!strings.Contains(err.Error(), gone+`: present (a change of task "three")`) {
				t.Errorf("verifyError = %v, want the path, present, and the task", err)
			}
		})
	}
}

// TestExpectationsLastOpDecides: a path's last op in the round trip is
// what the node must hold; a move leaves its source absent and its
// destination present; the state directory's bookkeeping is not read
// back.
func TestExpectationsLastOpDecides(t *testing.T) {
	ops := []transport.Op{
		{Kind: transport.OpWrite, Path: "/a", Content: []byte("1")},
		{Kind: transport.OpRemove, Path: "/a"},
		{Kind: transport.OpWrite, Path: "/b", Content: []byte("2")},
		{Kind: transport.OpMove, Path: "/d/c", From: "/c"},
		{Kind: transport.OpKeep, Path: "/proc/sys/x"},
		{Kind: transport.OpWrite, Path: "/var/lib/nc/pending/h.json", Content: []byte("{}")},
	}
	got := expectations(ops, "/var/lib/nc")
	want := map[string]string{"/a": "absent 1", "/b": "hash 2", "/c": "absent 3", "/d/c": "present 3"}
	if len(got) != len(want) {
		t.Fatalf("expectations = %+v", got)
	}
	for _, e := range got {
		kind := "present"
		switch {
		case e.absent:
			kind = "absent"
		case e.hash != "":
			kind = "hash"
		}
		if w := want[e.path]; w != kind+" "+string(rune('0'+e.op)) {
			t.Errorf("%s: %s %d, want %s", e.path, kind, e.op, w)
		}
	}
}
