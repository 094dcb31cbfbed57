package nvidiatoml

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// TestContainerdLoadsGolden loads the want output of every golden case
// marked `containerd:` into the real containerd 1.6 as a main config and
// checks the effective configuration it dumps: the rendered runtimes with
// their BinaryName, runc kept where it existed, and the default runtime.
// `config dump` needs no daemon and creates no state.
func TestContainerdLoadsGolden(t *testing.T) {
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("containerd is installed on this machine and required here: %v", err)
	}
	n := 0
	for _, gc := range loadGolden(t) {
		expect := gc.opts["containerd"]
		if expect == "" {
			continue
		}
		n++
		t.Run(strings.TrimSuffix(filepath.Base(gc.path), ".txtar"), func(t *testing.T) {
			if gc.layout.Version != 2 {
				t.Fatalf("containerd 1.6 reads version 2 only, case has %d", gc.layout.Version)
			}
			out, err := gc.want()
			if err != nil {
				t.Fatalf("Rebuild: %v", err)
			}
			if DetectVersion(out) != 2 {
				t.Fatalf("want output lacks version = 2:\n%s", out)
			}
			dump := containerdDump(t, bin, out)
			runtimes := dig(t, dump, "plugins", pluginV2, "containerd", "runtimes")
			for _, name := range strings.Split(expect, ",") {
				rt, ok := runtimes[name].(map[string]any)
				if !ok {
					t.Errorf("effective config lacks runtime %s; runtimes: %v", name, keys(runtimes))
					continue
				}
				for _, r := range gc.rts {
					if r.Name != name {
						continue
					}
					opts, _ := rt["options"].(map[string]any)
					if got := opts["BinaryName"]; got != r.BinaryName {
						t.Errorf("runtime %s: BinaryName %v, want %q", name, got, r.BinaryName)
					}
					if got := opts["SystemdCgroup"]; got != true {
						t.Errorf("runtime %s: SystemdCgroup %v, want true", name, got)
					}
				}
			}
			if want := gc.opts["containerd-default"]; want != "" {
				got := dig(t, dump, "plugins", pluginV2, "containerd")["default_runtime_name"]
				if got != want {
					t.Errorf("default_runtime_name %v, want %q", got, want)
				}
			}
		})
	}
	if n < 4 {
		t.Fatalf("only %d golden cases are checked against containerd, want at least 4", n)
	}
}

// containerdDump loads cfg as a main config and returns the parsed dump.
func containerdDump(t *testing.T, bin string, cfg []byte) map[string]any {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatalf("write config: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config", path, "config", "dump")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("containerd config dump: %v\nstderr: %s\nconfig:\n%s", err, stderr.String(), cfg)
	}
	var m map[string]any
	if err := toml.Unmarshal(out, &m); err != nil {
		t.Fatalf("parse dump: %v\n%s", err, out)
	}
	return m
}

// dig walks nested tables, failing the test where one is missing.
func dig(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	for i, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			t.Fatalf("dump has no table %s", strings.Join(path[:i+1], "."))
		}
		m = next
	}
	return m
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func writeFile(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
