package node

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
)

// TestApplySyncsBeforeLiveChange: the backup and the manifest line an op
// records are on disk before its live path changes, synced together with
// the op's own temporary file (one sync, not one each), and a change's
// directories are synced after it, by the next op's sync or the script's
// end. sync, mv and rm are wrapped on the
// node's PATH by logging stand-ins that then run the real program.
func TestApplySyncsBeforeLiveChange(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			root := t.TempDir()
			bin := filepath.Join(root, "bin")
			log := filepath.Join(root, "log")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, prog := range []string{"sync", "mv", "rm"} {
				real := "/usr/bin/" + prog
				if _, err := os.Stat(real); err != nil {
					real = "/bin/" + prog
				}
				w := fmt.Sprintf("#!/bin/sh\necho %s \"$@\" >> %s\nexec %s \"$@\"\n", prog, log, real)
				if err := os.WriteFile(filepath.Join(bin, prog), []byte(w), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			state := filepath.Join(root, "state")
			live := filepath.Join(root, "etc")
			runID := "20261201T040000Z-sync"
			h := NewHost(testConn(t, "node-"+sh, sh, []string{"PATH=" + bin + ":" + localconn.NodePath, "LC_ALL=C"}),
				HostOptions{RunID: runID, StateDir: state})
			existing := filepath.Join(live, "existing.toml")
			writeFile(t, existing, []byte("old\n"), 0o644)
			moved := filepath.Join(live, "conf.d", "zz.toml")
			writeFile(t, moved, []byte("registry\n"), 0o644)
			removed := filepath.Join(live, "conf.d", "gone.toml")
			writeFile(t, removed, []byte("gone\n"), 0o644)
			ops := []transport.Op{
				{Kind: transport.OpWrite, Path: existing, Content: []byte("new\n"), Backup: true},
				{Kind: transport.OpMove, From: moved, Path: filepath.Join(live, "disabled", "zz.toml"), Backup: true},
				{Kind: transport.OpRemove, Path: removed, Backup: true},
			}
			if _, err := h.Apply(context.Background(), ops); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				// Only the ops: the script's own scratch removal is not one.
				if !strings.Contains(l, "/state/tmp/") {
					lines = append(lines, l)
				}
			}
			bk := filepath.Join(state, "backups", runID)
			manifest := filepath.Join(bk, "MANIFEST")
			// Each live change (the write's rename, the move, the remove)
			// must come after a sync of its backup and of the manifest.
			// Each change's directories must be synced after it: before
			// the next live change, or by the script's end.
			changes := []struct {
				prefix, backup string
				dirs           []string
			}{
				{"mv -f -T -- " + filepath.Join(live, ".nodeconverge."), bk + existing, []string{live}},
				{"mv -f -T -- " + moved, bk + moved, []string{filepath.Join(live, "conf.d"), filepath.Join(live, "disabled")}},
				{"rm -f -- " + removed, bk + removed, []string{filepath.Join(live, "conf.d")}},
			}
			synced := map[string]bool{}
			pendingDirs := map[string]bool{}
			syncs := 0
			next := 0
			for _, l := range lines {
				if strings.HasPrefix(l, "sync ") {
					syncs++
					for _, f := range strings.Fields(strings.TrimPrefix(l, "sync -- ")) {
						synced[f] = true
						delete(pendingDirs, f)
					}
					continue
				}
				if next < len(changes) && strings.HasPrefix(l, changes[next].prefix) {
					c := changes[next]
					if !synced[c.backup] || !synced[manifest] {
						t.Errorf("%q ran before its backup %s and the manifest were synced (synced so far: %v)", l, c.backup, slices.Sorted(maps.Keys(synced)))
					}
					if len(pendingDirs) > 0 {
						t.Errorf("%q ran before the directories of the change before it were synced: %v", l, slices.Sorted(maps.Keys(pendingDirs)))
					}
					delete(synced, manifest)
					for _, d := range c.dirs {
						pendingDirs[d] = true
					}
					next++
				}
			}
			if next != len(changes) {
				t.Fatalf("saw %d of %d live changes in the log:\n%s", next, len(changes), strings.Join(lines, "\n"))
			}
			if len(pendingDirs) > 0 {
				t.Errorf("directories never synced after their change: %v", slices.Sorted(maps.Keys(pendingDirs)))
			}
			// One sync before each live change (carrying the directories
			// of the change before it), one at the end for the last's.
			if syncs != 4 {
				t.Errorf("%d syncs for 3 ops, want 4:\n%s", syncs, strings.Join(lines, "\n"))
			}

			// An op that fails ends the script: the change before it
			// still gets its directory synced (the EXIT trap).
			if err := os.Remove(log); err != nil {
				t.Fatal(err)
			}
			other := filepath.Join(root, "other")
			_, err = h.Apply(context.Background(), []transport.Op{
				{Kind: transport.OpWrite, Path: filepath.Join(other, "f"), Content: []byte("x\n")},
				{Kind: transport.OpMove, From: filepath.Join(live, "missing"), Path: filepath.Join(live, "to")},
			})
			if err == nil {
				t.Fatal("a move of a missing file succeeded")
			}
			b, err = os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			renamed, dirSynced := false, false
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if strings.HasPrefix(l, "mv -f -T -- "+filepath.Join(other, ".nodeconverge.")) {
					renamed = true
				}
				if renamed && strings.HasPrefix(l, "sync ") && slices.Contains(strings.Fields(l), other) {
					dirSynced = true
				}
			}
			if !renamed || !dirSynced {
				t.Errorf("renamed %v, directory synced after %v: the write's directory must be synced though the script failed:\n%s", renamed, dirSynced, b)
			}
		})
	}
}
