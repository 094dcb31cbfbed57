package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"nodeconverge/engine/transport"
)

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRollbackUndoesEveryOpOfTheRun(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			// A name with a quote and a space: the manifest quotes it.
			a := filepath.Join(dir, "etc", "it's a.conf")
			b := filepath.Join(dir, "etc", "new.conf")
			c := filepath.Join(dir, "etc", "conf.d", "zz.toml")
			d := filepath.Join(dir, "etc", "disabled", "zz.toml")
			e := filepath.Join(dir, "etc", "gone.conf")
			writeFile(t, a, []byte("a0\n"), 0o640)
			writeFile(t, c, []byte("c0\n"), 0o644)
			writeFile(t, d, []byte("d0\n"), 0o600)
			writeFile(t, e, []byte("e0\n"), 0o644)
			run := "20261129T211000Z-abcd"
			h := newTestHost(t, sh, HostOptions{RunID: run, StateDir: state})
			pending := PendingPath(state, "restart containerd")
			ops := []transport.Op{
				{Kind: transport.OpWrite, Path: a, Content: []byte("a1\n"), Backup: true},
				{Kind: transport.OpWrite, Path: b, Content: []byte("b1\n"), Backup: true},
				{Kind: transport.OpMove, Path: d, From: c, Backup: true},
				{Kind: transport.OpRemove, Path: e, Backup: true},
				{Kind: transport.OpWrite, Path: pending, Content: []byte("{}"), Backup: true},
			}
			if _, err := h.Apply(ctx, ops); err != nil {
				t.Fatal(err)
			}
			// A second Apply of the same run appends to the manifest.
			if _, err := h.Apply(ctx, []transport.Op{
				{Kind: transport.OpWrite, Path: a, Content: []byte("a2\n"), Backup: true},
				{Kind: transport.OpWrite, Path: b, Content: []byte("b2\n"), Backup: true},
			}); err != nil {
				t.Fatal(err)
			}
			bk := filepath.Join(state, "backups", run)
			// The node always single-quotes.
			q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
			want := strings.Join([]string{
				"write " + q(a) + " '' 1 " + q(bk+a),
				"write " + q(b) + " '' 0 ''",
				"move " + q(d) + " " + q(c) + " 1 " + q(bk+d),
				"remove " + q(e) + " '' 1 " + q(bk+e),
				"write " + q(a) + " '' 1 " + q(bk+a),
				"write " + q(b) + " '' 1 " + q(bk+b),
			}, "\n") + "\n"
			if diff := cmp.Diff(want, readString(t, ManifestPath(state, run))); diff != "" {
				t.Fatalf("manifest (-want +got):\n%s", diff)
			}

			paths, err := h.Rollback(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{b, a, e, c, d}, paths); diff != "" {
				t.Errorf("rolled back paths (-want +got):\n%s", diff)
			}
			for p, content := range map[string]string{a: "a0\n", c: "c0\n", d: "d0\n", e: "e0\n", pending: "{}"} {
				if got := readString(t, p); got != content {
					t.Errorf("%s after rollback = %q, want %q", p, got, content)
				}
			}
			if _, err := os.Stat(b); !os.IsNotExist(err) {
				t.Errorf("%s, created by the run, still exists after rollback (stat err %v)", b, err)
			}
			for p, mode := range map[string]os.FileMode{a: 0o640, d: 0o600} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != mode {
					t.Errorf("%s mode %v after rollback, want %v", p, fi.Mode().Perm(), mode)
				}
			}
			if _, err := os.Stat(bk); !os.IsNotExist(err) {
				t.Errorf("run backup dir %s still in place after a complete rollback (stat err %v)", bk, err)
			}
			aside, err := filepath.Glob(bk + ".rolled-back.*")
			if err != nil || len(aside) != 1 {
				t.Fatalf("rolled-back backup dir: %v %v", aside, err)
			}
			// A second rollback has nothing left to undo.
			again, err := h.Rollback(ctx)
			if err != nil || len(again) != 0 {
				t.Errorf("second rollback = %v, %v; want nothing", again, err)
			}
			// The run can apply again; a fresh manifest starts.
			if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: b, Content: []byte("b3\n"), Backup: true}}); err != nil {
				t.Fatal(err)
			}
			if got, want := readString(t, ManifestPath(state, run)), "write '"+b+"' '' 0 ''\n"; got != want {
				t.Errorf("fresh manifest = %q, want %q", got, want)
			}
		})
	}
}

func TestRollbackWithoutBackupReportsAndGoesOn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	kept := filepath.Join(dir, "kept")
	created := filepath.Join(dir, "created")
	writeFile(t, kept, []byte("old"), 0o644)
	h := newTestHost(t, "sh", HostOptions{RunID: "r1", StateDir: state})
	if _, err := h.Apply(ctx, []transport.Op{
		{Kind: transport.OpWrite, Path: created, Content: []byte("x")},
		{Kind: transport.OpWrite, Path: kept, Content: []byte("new")}, // no Backup
	}); err != nil {
		t.Fatal(err)
	}
	paths, err := h.Rollback(ctx)
	if err == nil || !strings.Contains(err.Error(), kept+": the op kept no backup") {
		t.Fatalf("rollback error = %v, want one naming %s", err, kept)
	}
	if diff := cmp.Diff([]string{created}, paths); diff != "" {
		t.Errorf("rolled back (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(created); !os.IsNotExist(err) {
		t.Errorf("created file survived the rollback: %v", err)
	}
	// The manifest stays for another attempt.
	if _, err := os.Stat(ManifestPath(state, "r1")); err != nil {
		t.Errorf("manifest gone after an incomplete rollback: %v", err)
	}
}

func TestRollbackOfNothing(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{RunID: "r1", StateDir: filepath.Join(t.TempDir(), "state")})
	paths, err := h.Rollback(context.Background())
	if err != nil || len(paths) != 0 {
		t.Fatalf("rollback without a manifest = %v, %v", paths, err)
	}
}

func TestPendingRecords(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	h := newTestHost(t, "sh", HostOptions{RunID: "r1", StateDir: state})
	if got, want := PendingPath(state, "restart containerd/now"), filepath.Join(state, "pending", "restart%20containerd%2Fnow.json"); got != want {
		t.Errorf("PendingPath = %q, want %q", got, want)
	}
	recs, err := h.Pending(ctx)
	if err != nil || len(recs) != 0 {
		t.Fatalf("pending on a fresh node = %v, %v", recs, err)
	}
	rec := PendingRecord{Handler: "restart containerd", RunID: "r1", Files: []string{"/etc/containerd/config.toml"}}
	op, err := PendingOp(state, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Apply(ctx, []transport.Op{op}); err != nil {
		t.Fatal(err)
	}
	recs, err = h.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]PendingRecord{"restart containerd": rec}, recs); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if _, err := h.Apply(ctx, []transport.Op{ClearPendingOp(state, "restart containerd")}); err != nil {
		t.Fatal(err)
	}
	if recs, err = h.Pending(ctx); err != nil || len(recs) != 0 {
		t.Errorf("pending after clear = %v, %v", recs, err)
	}
	// A garbled record left by something else is seen by the next run
	// (this run's reads are cached until it writes).
	writeFile(t, PendingPath(state, "bad"), []byte("{"), 0o600)
	next := newTestHost(t, "sh", HostOptions{RunID: "r2", StateDir: state})
	if _, err := next.Pending(ctx); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("garbled record: err = %v, want one naming it", err)
	}
}

// TestRollbackKeep: a kept path changed in place afterwards (as sysctl
// changes /proc/sys) gets its old content back in place; when it cannot be
// written back, the rollback says the path stays at the run's value.
func TestRollbackKeep(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			knob := filepath.Join(dir, "proc", "knob")
			writeFile(t, knob, []byte("128\n"), 0o644)
			h := newTestHost(t, sh, HostOptions{RunID: "r1", StateDir: state})
			res, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpKeep, Path: knob, Backup: true}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].BackupPath == "" {
				t.Fatalf("keep results = %+v, want the saved copy's path", res)
			}
			if got := readString(t, knob); got != "128\n" {
				t.Fatalf("keep changed the path: %q", got)
			}
			ino := func() uint64 {
				fi, err := os.Stat(knob)
				if err != nil {
					t.Fatal(err)
				}
				return fi.Sys().(*syscall.Stat_t).Ino
			}
			before := ino()
			writeFile(t, knob, []byte("8192\n"), 0o644)
			paths, err := h.Rollback(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{knob}, paths); diff != "" {
				t.Errorf("rolled back (-want +got):\n%s", diff)
			}
			if got := readString(t, knob); got != "128\n" {
				t.Errorf("after rollback %s = %q, want 128", knob, got)
			}
			if ino() != before {
				t.Errorf("rollback replaced %s instead of writing it in place", knob)
			}

			// A path that can no longer be written: the error says so.
			if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpKeep, Path: knob, Backup: true}}); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(knob); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(knob, 0o755); err != nil {
				t.Fatal(err)
			}
			_, err = h.Rollback(ctx)
			if err == nil || !strings.Contains(err.Error(), knob+": writing back its value from before the run failed, so it stays at this run's value") {
				t.Fatalf("rollback of an unwritable kept path: %v", err)
			}
		})
	}
}

// TestRollbackRunUndoesAnotherRun: a later run rolls back an earlier run's
// ops by its id (an owed restart covering the run that owed it), and
// refuses a run id from the node that would name another directory.
func TestRollbackRunUndoesAnotherRun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	f := filepath.Join(dir, "f")
	writeFile(t, f, []byte("old"), 0o644)
	earlier := newTestHost(t, "sh", HostOptions{RunID: "r1", StateDir: state})
	if _, err := earlier.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: f, Content: []byte("new"), Backup: true}}); err != nil {
		t.Fatal(err)
	}
	later := newTestHost(t, "sh", HostOptions{RunID: "r2", StateDir: state})
	if paths, err := later.Rollback(ctx); err != nil || len(paths) != 0 {
		t.Fatalf("the later run's own rollback = %v, %v; want nothing", paths, err)
	}
	paths, err := later.RollbackRun(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{f}, paths); diff != "" {
		t.Errorf("rolled back (-want +got):\n%s", diff)
	}
	if got := readString(t, f); got != "old" {
		t.Errorf("%s = %q after rolling back r1, want old", f, got)
	}
	for _, bad := range []string{"", "..", "../r1", "a/b"} {
		if _, err := later.RollbackRun(ctx, bad); err == nil || !strings.Contains(err.Error(), "cannot name a directory") {
			t.Errorf("RollbackRun(%q) = %v, want a refusal", bad, err)
		}
	}
}
