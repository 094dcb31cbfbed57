package containerdnvidia

import (
	"context"
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

// TestPastedTwiceConverges (issue 28 #3): the incident's own drop-in with
// its nvidia block appended a second time (`>>`), so no containerd loads
// it, converges with state present in one apply, through an explicit path
// and through path auto: the second Check plans nothing and the
// operator's runc options (SystemdCgroup = true) stay on every runtime.
func TestPastedTwiceConverges(t *testing.T) {
	repo := filepath.Join("..", "..", "lab", "scenarios", "incident")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(repo, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, gen := range []labtest.Generation{labtest.Containerd16, labtest.Containerd2} {
		for _, path := range []string{"explicit", Auto} {
			t.Run(string(gen)+"/"+path, func(t *testing.T) {
				bin := labtest.Containerd(t, gen)
				dir := t.TempDir()
				tk := toolkitDir(t, dir)
				main := filepath.Join(dir, "config.toml")
				dropin := filepath.Join(dir, "conf.d", "99-nvidia.toml")
				fix := func(s string) string {
					s = strings.ReplaceAll(s, "/etc/containerd/conf.d", filepath.Join(dir, "conf.d"))
					return strings.ReplaceAll(s, "/usr/local/nvidia/toolkit", tk)
				}
				op := fix(read("99-nvidia.toml"))
				i := strings.Index(op, `        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]`)
				j := strings.Index(op, `        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi]`)
				if i < 0 || j < i {
					t.Fatal("the incident's drop-in changed: no nvidia block to paste")
				}
				for p, s := range map[string]string{main: fix(read("config.toml")), dropin: op + "\n" + op[i:j]} {
					if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				a := Module{}.NewArgs().(*Args)
				a.Path, a.Config, a.ToolkitDir, a.State, a.Containerd = dropin, main, tk, "present", bin
				if path == Auto {
					a.Path = Auto
				}
				if err := a.Validate(); err != nil {
					t.Fatal(err)
				}
				check := func() *module.Plan {
					t.Helper()
					h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: filepath.Join(dir, "state"), RunID: "20260101T000000Z-test"})
					p, err := Module{}.Check(context.Background(), transport.ReadOnly(h), a)
					if err != nil {
						t.Fatalf("check: %v", err)
					}
					return p
				}
				p := check()
				if !p.Changed() {
					t.Fatal("the pasted-twice drop-in planned nothing")
				}
				for _, f := range p.Files {
					if err := os.WriteFile(f.Path, f.After, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if again := check(); again.Changed() {
					var paths []string
					for _, f := range again.Files {
						paths = append(paths, f.Path+":\n"+string(f.After))
					}
					t.Fatalf("did not converge in one apply; the second check plans %v", paths)
				}
				h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: t.TempDir()})
				tree, err := ctrconf.Gather(context.Background(), h, main, bin)
				if err != nil {
					t.Fatal(err)
				}
				e, err := ctrconf.Dump(context.Background(), h, tree, nil)
				if err != nil || !e.OK {
					t.Fatalf("dump: %v %s", err, e.ErrLine())
				}
				flat := e.Flat()
				for _, rt := range []string{"nvidia", "nvidia-cdi", "nvidia-legacy", "runc"} {
					found := false
					for k, v := range flat {
						if strings.Contains(k, ".runtimes."+rt+".options.") && strings.EqualFold(k[strings.LastIndex(k, ".")+1:], "SystemdCgroup") && v == "true" {
							found = true
						}
					}
					if !found {
						t.Errorf("%s lost SystemdCgroup = true", rt)
					}
				}
			})
		}
	}
}
