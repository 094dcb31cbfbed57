package containerddropins

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/lab/labtest"
)

// The incident's files (lab/scenarios/incident), read from the lab so the
// tests and the lab never drift apart.
func scenario(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "lab", "scenarios", "incident", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tree writes files below a temp root; "%ROOT%" in contents becomes it.
// It returns the root and the main config's path.
func tree(t *testing.T, files map[string]string) (root, mainPath string) {
	t.Helper()
	root = t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		c = strings.ReplaceAll(c, "/etc/containerd/conf.d", root+"/etc/containerd/conf.d")
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, filepath.Join(root, "etc/containerd/config.toml")
}

func check(t *testing.T, gen labtest.Generation, root, mainPath string, edit func(*Args)) (*module.Plan, error) {
	t.Helper()
	a := Module{}.NewArgs().(*Args)
	a.Config = mainPath
	a.QuarantineDir = filepath.Join(root, "etc/containerd/conf.d.disabled")
	a.Containerd = labtest.Containerd(t, gen)
	if edit != nil {
		edit(a)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	h := transport.ReadOnly(transport.NewHost(transport.NewLocal("local"), transport.HostOptions{}))
	return Module{}.Check(context.Background(), h, a)
}

func moves(p *module.Plan) []string {
	var out []string
	for _, f := range p.Files {
		if f.Action == module.Move {
			out = append(out, filepath.Base(f.From))
		}
	}
	return out
}

// Issue 10, defect 8: two identical shadowing drop-ins. Removing either one
// alone changes nothing; both must go, together, and the plan says so.
func TestPairOfShadowingDropins(t *testing.T) {
	zz := scenario(t, "zz-labhub-registry.toml")
	root, mainPath := tree(t, map[string]string{
		"etc/containerd/config.toml":                         scenario(t, "config.toml"),
		"etc/containerd/conf.d/99-nvidia.toml":               scenario(t, "99-nvidia.toml"),
		"etc/containerd/conf.d/zz-labhub-registry.toml":      zz,
		"etc/containerd/conf.d/zz-labhub-registry.orig.toml": zz,
	})
	p, err := check(t, labtest.Containerd16, root, mainPath, func(a *Args) { a.Protect = []string{"99-nvidia.toml"} })
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(moves(p), " ")
	if got != "zz-labhub-registry.orig.toml zz-labhub-registry.toml" {
		t.Fatalf("moves = %q, want both copies (notes %q)", got, p.Notes)
	}
	var restored bool
	for _, c := range p.Effective {
		if strings.HasSuffix(c.Key, "runtimes.nvidia.options.BinaryName") && strings.Contains(c.After, "nvidia-container-runtime") {
			restored = true
		}
	}
	if !restored {
		t.Errorf("the plan does not bring back the nvidia runtime: %+v", p.Effective)
	}
}

// Issue 11, item 11: one drop-in that hides values of two plugins (on
// 2.1.5 a 2.x-layout registry drop-in hid cri.v1.runtime and cri.v1.images;
// containerd 2.4 no longer does, 1.6 does for any plugin it replaces) is
// moved once: one move per file, not one per shadowed plugin.
func TestOneMovePerFile(t *testing.T) {
	main := scenario(t, "config.toml") + `
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.gc.v1.scheduler"]
    pause_threshold = 0.05
    deletion_threshold = 7
    startup_delay = "100ms"
`
	root, mainPath := tree(t, map[string]string{
		"etc/containerd/config.toml": main,
		"etc/containerd/conf.d/zz-labhub-registry.toml": `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.gc.v1.scheduler"]
  startup_delay = "100ms"
`,
	})
	p, err := check(t, labtest.Containerd16, root, mainPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(moves(p), " "); got != "zz-labhub-registry.toml" {
		t.Fatalf("moves = %q, want zz-labhub-registry.toml once", got)
	}
}
