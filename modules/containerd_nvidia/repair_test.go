package containerdnvidia

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"
)

// TestRepairDropinPastedTwice (issue 10, defect 9): a table pasted twice in
// the GPU Operator's drop-in, with CRLF line endings, is repaired by
// state repair (the tree loads again) and then made exactly one set by
// state present with path auto; a third Check plans nothing. Run against
// the real containerd of both generations through the real transport
// scripts on this machine.
func TestRepairDropinPastedTwice(t *testing.T) {
	for _, c := range []struct {
		gen     labtest.Generation
		plugin  string
		version string
	}{
		{labtest.Containerd16, `"io.containerd.grpc.v1.cri"`, "2"},
		{labtest.Containerd2, `"io.containerd.cri.v1.runtime"`, "3"},
	} {
		t.Run(string(c.gen), func(t *testing.T) {
			bin := labtest.Containerd(t, c.gen)
			dir := t.TempDir()
			tk := toolkitDir(t, dir)
			main := filepath.Join(dir, "config.toml")
			write := func(p, s string) {
				t.Helper()
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(main, "version = "+c.version+"\nimports = [\""+dir+"/conf.d/*.toml\"]\n")
			paste := "[plugins." + c.plugin + ".containerd.runtimes.nvidia]\n  runtime_type = \"io.containerd.runc.v2\"\n" +
				"[plugins." + c.plugin + ".containerd.runtimes.nvidia.options]\n  BinaryName = \"" + tk + "/nvidia-container-runtime\"\n"
			dropin := filepath.Join(dir, "conf.d", "99-nvidia.toml")
			write(dropin, strings.ReplaceAll("version = "+c.version+"\n# the operator's note\n\n"+paste+paste, "\n", "\r\n"))

			check := func(state string) *module.Plan {
				t.Helper()
				p, err := checkAuto(t, main, tk, state, bin)
				if err != nil {
					t.Fatalf("Check(%s): %v", state, err)
				}
				for _, f := range p.Files {
					write(f.Path, string(f.After))
				}
				return p
			}
			// A tree with a table defined twice is not dumped: no
			// containerd loads it. Only the repaired candidate is run.
			a := Module{}.NewArgs().(*Args)
			a.Path, a.Config, a.ToolkitDir, a.State, a.Containerd = Auto, main, tk, "repair", bin
			if err := a.Validate(); err != nil {
				t.Fatal(err)
			}
			h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: t.TempDir()})
			p, err := Module{}.Check(context.Background(), h, a)
			if err != nil {
				t.Fatal(err)
			}
			if ran, _ := h.StageCounts(); ran != 1 {
				t.Errorf("repair ran %d containerd dumps, want 1 (the candidate)", ran)
			}
			if len(p.Evidence) != 2 || p.Evidence[0].OK || !strings.HasPrefix(p.Evidence[0].Command, "read the table headers of "+dropin) ||
				!strings.Contains(p.Evidence[0].Output, "already exists") || !p.Evidence[1].OK {
				t.Errorf("evidence = %+v, want the live tree's parse failure, then the loading candidate", p.Evidence)
			}
			if len(p.Effective) != 1 || !strings.HasPrefix(p.Effective[0].Before, "does not load: containerd cannot load "+dropin) {
				t.Errorf("effective = %+v", p.Effective)
			}
			if p := check("repair"); len(p.Files) != 1 || p.Files[0].Path != dropin {
				t.Fatalf("repair should rewrite only %s: %+v", dropin, p.Files)
			}
			// After the repair no file mentions the CRI plugin: the
			// drop-in an import loads is where the runtimes go, on 1.6
			// together with the built-in runc its new CRI table would drop.
			if p := check("present"); len(p.Files) != 1 || p.Files[0].Path != dropin {
				t.Fatalf("present should rewrite only %s: %+v", dropin, p.Files)
			}
			if p := check("present"); len(p.Files) != 0 {
				t.Fatalf("a converged tree planned changes: %+v", p.Files)
			}
			if p := check("repair"); len(p.Files) != 0 {
				t.Fatalf("repair on a tree that parses planned changes: %+v", p.Files)
			}
			got, err := os.ReadFile(dropin)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), "# the operator's note\r\n") || strings.Count(string(got), "\r\n") != strings.Count(string(got), "\n") {
				t.Errorf("comment or CRLF lost:\n%q", got)
			}
			dump, err := runDump(bin, main)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"nvidia-container-runtime'", "nvidia-container-runtime.cdi", "nvidia-container-runtime.legacy"} {
				w := strings.ReplaceAll(want, "'", "")
				if !strings.Contains(dump, w) {
					t.Errorf("dump lacks %s:\n%s", w, dump)
				}
			}
		})
	}
}

func runDump(bin, config string) (string, error) {
	out, err := exec.Command(bin, "--config", config, "config", "dump").Output()
	if err != nil {
		return "", fmt.Errorf("%s config dump: %w", bin, err)
	}
	return string(out), nil
}

// checkAuto runs Check with path auto for main on the local machine. Each
// call gets its own Host: a Host caches what it read until it writes
// itself, and these tests write behind its back.
func checkAuto(t *testing.T, main, tk, state, bin string) (*module.Plan, error) {
	t.Helper()
	a := Module{}.NewArgs().(*Args)
	a.Path, a.Config, a.ToolkitDir, a.State, a.Containerd = Auto, main, tk, state, bin
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: t.TempDir()})
	return Module{}.Check(context.Background(), h, a)
}

// toolkitDir makes dir/conf.d and dir/toolkit holding the three toolkit
// binaries (empty scripts: the module checks they exist, containerd's
// dump never runs them) and returns the toolkit dir.
func toolkitDir(t *testing.T, dir string) string {
	t.Helper()
	tk := filepath.Join(dir, "toolkit")
	for _, d := range []string{tk, filepath.Join(dir, "conf.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"nvidia-container-runtime", "nvidia-container-runtime.cdi", "nvidia-container-runtime.legacy"} {
		if err := os.WriteFile(filepath.Join(tk, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tk
}

// TestRedefinedOnlyWhatContainerdRefuses: a live tree is declared unloadable
// without a dump only when the node's containerd really refuses it. Our
// decoder refuses more than go-toml v1 does (containerd 1.x loads `a.b = 1`
// then `[a]`, and [x."k"] then [x.'k']): each such drop-in is run through
// the real containerd of every generation, and the shortcut must never fire
// on one that loads.
func TestRedefinedOnlyWhatContainerdRefuses(t *testing.T) {
	cri := `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]` + "\n  runtime_type = \"io.containerd.runc.v2\"\n"
	docs := []struct {
		name, src string
		decided   bool // the shortcut must fire (the incident's paste)
	}{
		{"pasted twice", cri + cri, true},
		{"indented repeat", "[a]\nx = 1\n  [a]\ny = 2\n", true},
		{"dotted then table", "a.b = 1\n[a]\nc = 2\n", false},
		{"quoted differently", "[plugins.\"x\"]\nv = 1\n[plugins.'x']\nw = 1\n", false},
		{"table then dotted", "[a]\nb.c = 1\n[a.b]\nd = 1\n", false},
		{"key twice", "x = 1\nx = 2\n", false},
		{"array then table", "[[a]]\nx = 1\n[a]\ny = 1\n", false},
		{"inline then table", "a = {x = 1}\n[a]\ny = 1\n", false},
	}
	for _, g := range []labtest.Generation{labtest.Containerd16, labtest.Containerd17, labtest.Containerd2} {
		t.Run(string(g), func(t *testing.T) {
			bin := labtest.Containerd(t, g)
			for _, d := range docs {
				t.Run(d.name, func(t *testing.T) {
					dir := t.TempDir()
					main := filepath.Join(dir, "config.toml")
					if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
						t.Fatal(err)
					}
					for p, s := range map[string]string{
						main: "version = 2\nimports = [\"" + dir + "/conf.d/*.toml\"]\n",
						filepath.Join(dir, "conf.d", "50-x.toml"): d.src,
					} {
						if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: t.TempDir()})
					tree, err := ctrconf.Gather(context.Background(), h, main, bin)
					if err != nil {
						t.Fatal(err)
					}
					u, decided := redefined(tree)
					_, loadErr := runDump(bin, main)
					if decided && loadErr == nil {
						t.Fatalf("declared unloadable (%s), but containerd %s loads it", u.Why, g)
					}
					if decided != d.decided {
						t.Errorf("decided without a dump = %v, want %v (containerd: %v)", decided, d.decided, loadErr)
					}
				})
			}
		})
	}
}
