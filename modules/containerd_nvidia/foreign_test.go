package containerdnvidia

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"
)

// corpusNode puts a corpus config (e2e/testdata/corpus, with its SOURCE) in
// a temporary directory as the main config, its absolute paths under
// /etc/containerd moved there.
func corpusNode(t *testing.T, name string) (dir, main, tk string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "corpus", name, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	tk = toolkitDir(t, dir)
	main = filepath.Join(dir, "config.toml")
	if err := os.WriteFile(main, []byte(strings.ReplaceAll(string(b), "/etc/containerd/", dir+"/")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, main, tk
}

func checkArgs(t *testing.T, dir string, a *Args) (*module.Plan, error) {
	t.Helper()
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: filepath.Join(dir, "state"), RunID: "20260101T000000Z-test"})
	return Module{}.Check(context.Background(), transport.ReadOnly(h), a)
}

func effective(t *testing.T, main, bin string) map[string]string {
	t.Helper()
	h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: t.TempDir()})
	tree, err := ctrconf.Gather(context.Background(), h, main, bin)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ctrconf.Dump(context.Background(), h, tree, nil)
	if err != nil || !e.OK {
		t.Fatalf("dump: %v %s", err, e.ErrLine())
	}
	return e.Flat()
}

// TestForeignNvidiaRefused (issue 28 #4): gVisor's documented runsc runtime,
// named nvidia, is not rewritten as runc: present and absent are refused
// before any write, naming what the runtime is; replace_foreign replaces
// it as asked.
func TestForeignNvidiaRefused(t *testing.T) {
	for _, gen := range []labtest.Generation{labtest.Containerd16, labtest.Containerd2} {
		t.Run(string(gen), func(t *testing.T) {
			bin := labtest.Containerd(t, gen)
			dir, main, tk := corpusNode(t, "gvisor-nvidia")
			for _, state := range []string{"present", "absent"} {
				a := Module{}.NewArgs().(*Args)
				a.Path, a.Config, a.ToolkitDir, a.State, a.Containerd = Auto, main, tk, state, bin
				_, err := checkArgs(t, dir, a)
				var ve *module.ValidationError
				if !errors.As(err, &ve) || !strings.Contains(err.Error(), `runtime "nvidia"`) || !strings.Contains(err.Error(), "gVisor (runsc)") ||
					!strings.Contains(err.Error(), "TypeUrl") || !strings.Contains(err.Error(), "replace_foreign") {
					t.Fatalf("state %s: want a refusal naming gVisor's runtime, got %v", state, err)
				}
			}
			a := Module{}.NewArgs().(*Args)
			a.Path, a.Config, a.ToolkitDir, a.State, a.Containerd, a.ReplaceForeign = Auto, main, tk, "present", bin, true
			p, err := checkArgs(t, dir, a)
			if err != nil || !p.Changed() {
				t.Fatalf("replace_foreign: %v %+v", err, p)
			}
			for _, f := range p.Files {
				if strings.Contains(string(f.After), "runsc") {
					t.Errorf("replace_foreign kept runsc in %s:\n%s", f.Path, f.After)
				}
			}
		})
	}
}

// TestRebuildKeepsBaseRuntimeSpec (issue 28 #4): Bottlerocket's default
// runtime is nvidia with the platform's base_runtime_spec; the rebuild
// owns BinaryName and runtime_type only, so base_runtime_spec stays
// effective and a second check plans nothing.
func TestRebuildKeepsBaseRuntimeSpec(t *testing.T) {
	for _, gen := range []labtest.Generation{labtest.Containerd16, labtest.Containerd2} {
		t.Run(string(gen), func(t *testing.T) {
			bin := labtest.Containerd(t, gen)
			dir, main, tk := corpusNode(t, "bottlerocket-nvidia")
			a := Module{}.NewArgs().(*Args)
			a.Path, a.Config, a.ToolkitDir, a.State, a.Containerd = Auto, main, tk, "present", bin
			p, err := checkArgs(t, dir, a)
			if err != nil || !p.Changed() {
				t.Fatalf("check: %v %+v", err, p)
			}
			for _, f := range p.Files {
				if err := os.WriteFile(f.Path, f.After, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if again, err := checkArgs(t, dir, a); err != nil || again.Changed() {
				t.Fatalf("second check: %v %+v", err, again)
			}
			want := `"` + dir + `/cri-base.json"`
			found := false
			for k, v := range effective(t, main, bin) {
				if strings.HasSuffix(k, ".runtimes.nvidia.base_runtime_spec") {
					found = true
					if v != want {
						t.Errorf("%s = %s, want %s", k, v, want)
					}
				}
			}
			if !found {
				t.Error("nvidia has no base_runtime_spec after the rebuild")
			}
		})
	}
}
