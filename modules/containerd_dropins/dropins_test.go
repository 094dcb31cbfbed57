package containerddropins

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
	h := transport.ReadOnly(node.NewHost(localconn.New("local"), node.HostOptions{StateDir: t.TempDir()}))
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

// criMain is a main config with CRI settings of its own, as real ones have:
// a registry mirror and credentials, a base runtime spec, CNI directories.
// The e2e tests load the same file (testdata/cri-main.toml).
func criMainConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cri-main.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// operatorDropin is the GPU Operator's drop-in: a whole CRI table (as the
// toolkit found it, without the registry) plus its runtimes.
func operatorDropin(t *testing.T) string {
	s := scenario(t, "99-nvidia.toml")
	i := strings.Index(s, `    [plugins."io.containerd.grpc.v1.cri".registry]`)
	if i < 0 {
		t.Fatal("scenario 99-nvidia.toml has no registry table")
	}
	return s[:i]
}

// Issue 10, defect 6: a protected drop-in that replaces the CRI table hides
// the main config's own CRI settings. By default they are absorbed into the
// protected file (it is never moved), proven with the node's containerd;
// absorb: false refuses naming the keys; accept_shadowed accepts them.
func TestShadowedByProtectedDropin(t *testing.T) {
	root, mainPath := tree(t, map[string]string{
		"etc/containerd/config.toml":           criMainConfig(t),
		"etc/containerd/conf.d/99-nvidia.toml": operatorDropin(t),
	})
	protect := func(a *Args) { a.Protect = []string{"99-nvidia.toml"} }
	p, err := check(t, labtest.Containerd16, root, mainPath, protect)
	if err != nil {
		t.Fatal(err)
	}
	if len(moves(p)) != 0 || len(p.Files) != 1 || p.Files[0].Action != module.Update || filepath.Base(p.Files[0].Path) != "99-nvidia.toml" {
		t.Fatalf("want one update of 99-nvidia.toml and no move, got %d file changes, moves %v", len(p.Files), moves(p))
	}
	after := string(p.Files[0].After)
	for _, want := range []string{"mirror.lab:5000", "s3cret-robot", "cri-base.json", "/opt/cni/bin-lab", "/etc/cni/net.d-lab", "nvidia-container-runtime.cdi"} {
		if !strings.Contains(after, want) {
			t.Errorf("absorbed 99-nvidia.toml lacks %s:\n%s", want, after)
		}
	}

	_, err = check(t, labtest.Containerd16, root, mainPath, func(a *Args) { protect(a); a.Absorb = false })
	var ve *module.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Msg, `endpoint = ["https://mirror.lab:5000"]`) || !strings.Contains(ve.Msg, "base_runtime_spec") {
		t.Fatalf("absorb: false should refuse naming the hidden keys as TOML, got %v", err)
	}
	if strings.Contains(ve.Msg, "s3cret-robot") {
		t.Fatalf("refusal shows a credential:\n%s", ve.Msg)
	}

	p, err = check(t, labtest.Containerd16, root, mainPath, func(a *Args) {
		protect(a)
		a.Absorb = false
		a.AcceptShadowed = []string{`plugins."io.containerd.grpc.v1.cri".registry`, `plugins."io.containerd.grpc.v1.cri".cni`,
			`plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.*`}
	})
	if err != nil || len(p.Files) != 0 {
		t.Fatalf("accept_shadowed should accept the hidden keys and change nothing: %v %d", err, len(p.Files))
	}
}

// Consolidating the main config's mirrors into a drop-in that sets
// config_path would give a config `config dump` accepts and the CRI plugin
// refuses: refused, naming both.
func TestAbsorbRefusesMirrorsWithConfigPath(t *testing.T) {
	root, mainPath := tree(t, map[string]string{
		"etc/containerd/config.toml":           criMainConfig(t),
		"etc/containerd/conf.d/99-nvidia.toml": scenario(t, "99-nvidia.toml"),
	})
	_, err := check(t, labtest.Containerd16, root, mainPath, func(a *Args) { a.Protect = []string{"99-nvidia.toml"} })
	var ve *module.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Msg, "refuses mirrors together with config_path") {
		t.Fatalf("want a refusal naming mirrors and config_path, got %v", err)
	}
}

// Issue 10, defect 9 and issue 11, item 11: a file containerd refuses (a
// table pasted twice, a directory or a dangling symlink matched by the
// import glob) makes the tree undecidable: nothing is moved, the task is
// skipped naming the path, and the plan is not an error, so a later task
// may repair it.
func TestUndecidableTree(t *testing.T) {
	nvidia := scenario(t, "99-nvidia.toml")
	paste := scenario(t, "omen-nvidia-append.toml")
	for _, g := range []labtest.Generation{labtest.Containerd16, labtest.Containerd2} {
		for _, c := range []struct {
			name, path, why string
			make            func(t *testing.T, root string)
		}{
			{"pasted twice", "99-nvidia.toml", "does not parse", func(t *testing.T, root string) {
				writeFile(t, filepath.Join(root, "etc/containerd/conf.d/99-nvidia.toml"), nvidia+paste+paste)
			}},
			{"directory", "50-dir.toml", "is a directory", func(t *testing.T, root string) {
				if err := os.MkdirAll(filepath.Join(root, "etc/containerd/conf.d/50-dir.toml"), 0o755); err != nil {
					t.Fatal(err)
				}
			}},
			{"dangling symlink", "40-gone.toml", "is a dangling symlink", func(t *testing.T, root string) {
				if err := os.Symlink(filepath.Join(root, "nowhere.toml"), filepath.Join(root, "etc/containerd/conf.d/40-gone.toml")); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(string(g)+"/"+c.name, func(t *testing.T) {
				root, mainPath := tree(t, map[string]string{
					"etc/containerd/config.toml":                    scenario(t, "config.toml"),
					"etc/containerd/conf.d/99-nvidia.toml":          nvidia,
					"etc/containerd/conf.d/zz-labhub-registry.toml": scenario(t, "zz-labhub-registry.toml"),
				})
				c.make(t, root)
				p, err := check(t, g, root, mainPath, func(a *Args) { a.Protect = []string{"99-nvidia.toml"} })
				if err != nil {
					t.Fatalf("an undecidable tree must not fail the task: %v", err)
				}
				if len(p.Files) != 0 || !strings.Contains(p.Skip, c.path+" "+c.why) {
					t.Fatalf("want no change and a skip naming %s %s, got %d changes, skip %q", c.path, c.why, len(p.Files), p.Skip)
				}
			})
		}
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Issue 10 matrix (aks-gpu with the incident's drop-ins, 1.x): the
// registry drop-in hides the protected 99-nvidia.toml's runtimes alone and,
// with it, the main config's CRI settings. It belongs to two units and was
// moved twice (the second move failed after the first, "no such file"):
// it moves once, and the main config's settings are absorbed.
func TestDropinInTwoUnitsMovesOnce(t *testing.T) {
	main := strings.Replace(criMainConfig(t), `    [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
      endpoint = ["https://mirror.lab:5000"]
`, "", 1)
	main = strings.Replace(main, `sandbox_image = "registry.k8s.io/pause:3.9"`, `sandbox_image = "main.lab/pause:1"`, 1)
	root, mainPath := tree(t, map[string]string{
		"etc/containerd/config.toml":                    main,
		"etc/containerd/conf.d/99-nvidia.toml":          operatorDropin(t),
		"etc/containerd/conf.d/zz-labhub-registry.toml": scenario(t, "zz-labhub-registry.toml"),
	})
	p, err := check(t, labtest.Containerd16, root, mainPath, func(a *Args) { a.Protect = []string{"99-nvidia.toml"} })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(moves(p), " "); got != "zz-labhub-registry.toml" {
		t.Fatalf("moves = %q, want zz-labhub-registry.toml once", got)
	}
	notes := 0
	for _, f := range p.Files {
		if strings.HasSuffix(f.Path, NoteSuffix) {
			notes++
		}
	}
	if notes != 1 {
		t.Fatalf("%d notes, want 1", notes)
	}
	// What the protected file spells itself wins over the earlier main
	// config's value, as it does once the registry drop-in is gone; the
	// main config's other hidden settings are absorbed.
	for _, f := range p.Files {
		if filepath.Base(f.Path) != "99-nvidia.toml" {
			continue
		}
		after := string(f.After)
		if !strings.Contains(after, "registry.k8s.io/pause:3.9") || strings.Contains(after, "main.lab/pause:1") {
			t.Errorf("absorb overwrote the protected file's own sandbox_image:\n%s", after)
		}
		if !strings.Contains(after, "/opt/cni/bin-lab") {
			t.Errorf("absorb lost the main config's hidden CNI bin_dir:\n%s", after)
		}
	}
}

// Issue 10 matrix (containerd's own 1.6 default config with the incident's
// drop-ins, 1.x): the main config spells every runc option at its zero
// value; 99-nvidia.toml (protected) replaces the CRI table without them.
// An option absent from the effective config is its zero value for the
// shim, so these are not values out of effect, and relocating the registry
// drop-in is not refused for them.
func TestZeroOptionsDroppedAreInEffect(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "e2e", "testdata", "corpus", "containerd-1.6-default", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	main := strings.Replace(string(b), "imports = []", `imports = ["/etc/containerd/conf.d/*.toml"]`, 1)
	root, mainPath := tree(t, map[string]string{
		"etc/containerd/config.toml":                    main,
		"etc/containerd/conf.d/99-nvidia.toml":          scenario(t, "99-nvidia.toml"),
		"etc/containerd/conf.d/zz-labhub-registry.toml": scenario(t, "zz-labhub-registry.toml"),
	})
	p, err := check(t, labtest.Containerd16, root, mainPath, func(a *Args) { a.Protect = []string{"99-nvidia.toml"} })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(moves(p), " "); got != "zz-labhub-registry.toml" {
		t.Fatalf("moves = %q, want zz-labhub-registry.toml", got)
	}
}

// TestSummaryNamesZeroValues: a note about values a move brings back names
// them even when every one is a zero value (config_path = ""), instead of an
// empty list and "(and 1 more)".
func TestSummaryNamesZeroValues(t *testing.T) {
	cs := []module.EffectiveChange{{Key: `plugins."io.containerd.cri.v1.images".registry.config_path`, Before: `"/etc/containerd/certs.d"`, After: `""`}}
	if got := summary(cs); !strings.Contains(got, "registry.config_path = \"\"") || strings.Contains(got, "more") {
		t.Errorf("summary = %q", got)
	}
	cs = append(cs, module.EffectiveChange{Key: "k", After: `"v"`})
	if got := summary(cs); got != `k = "v" (and 1 more)` {
		t.Errorf("summary = %q", got)
	}
}
