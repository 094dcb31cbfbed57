package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/transport"
)

// entries lists the names in dir; a missing dir has none.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestScratchUnderStateDir: a staged file lives in a 0700 directory under
// StateDir/tmp, and nothing is left there once the script ends; a script
// killed by SIGKILL leaves its directory (with the staged secret), and the
// next script on the node removes it.
func TestScratchUnderStateDir(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			state := filepath.Join(t.TempDir(), "state")
			h := newTestHost(t, sh, HostOptions{StateDir: state, RunID: "r1"})
			ctx := context.Background()
			secret := map[string]transport.StagedFile{"conf.d/secret.toml": {Content: []byte("password = \"s3cret\"\n"), Mode: 0o600}}
			res, err := h.Stage(ctx, transport.StageRequest{Files: secret, Cmds: []transport.Cmd{{Script: `echo "$SCRATCH"; stat -c %a "$SCRATCH/.." "$SCRATCH/../.."`}}})
			if err != nil {
				t.Fatal(err)
			}
			out := strings.Fields(string(res[0].Stdout))
			if len(out) != 3 || !strings.HasPrefix(out[0], filepath.Join(state, ScratchDirName)+"/") || out[1] != "700" || out[2] != "700" {
				t.Fatalf("scratch dir and modes = %q, want under %s/%s, both 700", out, state, ScratchDirName)
			}
			if got := entries(t, filepath.Join(state, ScratchDirName)); len(got) != 0 {
				t.Fatalf("left in %s/%s after the script ended: %q", state, ScratchDirName, got)
			}

			// SIGKILL of the script's shell: no trap runs. A Stage
			// command runs in a subshell of that shell, so $$ is it.
			if _, err := h.Stage(ctx, transport.StageRequest{Files: secret, Cmds: []transport.Cmd{{Script: `kill -KILL $$`}}}); err == nil {
				t.Fatal("a script killed by SIGKILL succeeded")
			}
			left := entries(t, filepath.Join(state, ScratchDirName))
			if len(left) != 1 {
				t.Fatalf("want the killed script's directory left behind, got %q", left)
			}
			if _, err := os.Stat(filepath.Join(state, ScratchDirName, left[0], "scratch/conf.d/secret.toml")); err != nil {
				t.Fatalf("the killed script's staged file: %v", err)
			}
			if _, err := h.Query(ctx, transport.Query{Files: []string{"/proc/self/stat"}}); err != nil {
				t.Fatal(err)
			}
			if got := entries(t, filepath.Join(state, ScratchDirName)); len(got) != 0 {
				t.Fatalf("the next script did not remove the killed script's directory: %q", got)
			}
			if got := entries(t, tmp); len(got) != 0 {
				t.Fatalf("left in TMPDIR: %q", got)
			}
		})
	}
}

// TestScratchFallback: when the state directory cannot be made (here its
// parent is a regular file), a Query still works, in TMPDIR, and leaves
// nothing there.
func TestScratchFallback(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, nil, 0o644)
	h := newTestHost(t, "sh", HostOptions{StateDir: filepath.Join(file, "state"), RunID: "r1"})
	snap, err := h.Query(context.Background(), transport.Query{Files: []string{file}, Cmds: []transport.Cmd{{Script: `ls "$TMPDIR"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(snap.Cmds[0].Stdout); !strings.HasPrefix(got, "nodeconverge.") {
		t.Fatalf("private dir %q, want under %s", got, tmp)
	}
	if got := entries(t, tmp); len(got) != 0 {
		t.Fatalf("left in TMPDIR: %q", got)
	}
}
