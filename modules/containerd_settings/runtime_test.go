package containerdsettings

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/transport"
	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"
)

// TestBuiltinRuntime: a declared option of the built-in runc, which no file
// defines. containerd 1.x takes the runtime's whole table from the one file
// that writes it, so its runtime_type and options are written along (else
// runc would lose its runtime_type); 2.x merges per key and gets only the
// option, in a drop-in of its own.
func TestBuiltinRuntime(t *testing.T) {
	for _, g := range generations {
		t.Run(string(g), func(t *testing.T) {
			n := newNode(t, g, "version = 2\nimports = [\"CONFD/*.toml\"]\n", nil)
			a := n.args("cri.runtimes.runc.options.SystemdCgroup: true\ncri.registry.config_path: /etc/containerd/certs.d\n")
			p := n.converge(a)
			after := string(p.Files[0].After)
			dump := n.dump()
			if !strings.Contains(dump, "SystemdCgroup = true") || !strings.Contains(dump, "runtime_type = \"io.containerd.runc.v2\"") && !strings.Contains(dump, "runtime_type = 'io.containerd.runc.v2'") {
				t.Errorf("dump lacks SystemdCgroup or runc's runtime_type:\n%s", dump)
			}
			if g == labtest.Containerd16 {
				if p.Files[0].Path != n.main || !strings.Contains(after, "runtime_type = \"io.containerd.runc.v2\"") {
					t.Errorf("1.x: want runc carried into %s:\n%s", n.main, after)
				}
				return
			}
			if p.Files[0].Path != a.Dropin || strings.Contains(after, "runtime_type") {
				t.Errorf("2.x: want only the option in %s:\n%s", a.Dropin, after)
			}
		})
	}
}

// TestExplainDeclared: `nodeconverge explain --playbook` places each
// declared value in the measured explanation: the lost config_path is not
// in effect (on 1.x put back to the default by the drop-in that replaced
// the CRI table), the sandbox image is, decided by the last file that says it.
func TestExplainDeclared(t *testing.T) {
	for _, g := range generations {
		t.Run(string(g), func(t *testing.T) {
			n := newNode(t, g, strings.Replace(incidentMain, "    [plugins.\"io.containerd.grpc.v1.cri\".containerd]", "    [plugins.\"io.containerd.grpc.v1.cri\".registry]\n      config_path = \"/etc/containerd/certs.d\"\n    [plugins.\"io.containerd.grpc.v1.cri\".containerd]", 1),
				map[string]string{"99-nvidia.toml": nvidiaCTKDropin})
			a := n.args("cri.registry.config_path: /etc/containerd/certs.d\ncri.sandbox_image: registry.k8s.io/pause:3.9\ncri.runtimes.runc.options.SystemdCgroup: true\n")
			ex, err := ctrconf.Explain(context.Background(), transport.ReadOnly(n.h), n.main, n.bin)
			if err != nil {
				t.Fatal(err)
			}
			got := a.Settings.Place(ex)
			dropin := filepath.Join(n.confd, "99-nvidia.toml")
			if len(got) != 3 {
				t.Fatalf("got %+v", got)
			}
			cp, sb, cg := got[0], got[1], got[2]
			if g == labtest.Containerd16 {
				if cp.InEffect || cp.Effective != `""` || cp.ResetBy != dropin {
					t.Errorf("1.x config_path: %+v, want not in effect, reset by %s", cp, dropin)
				}
			} else if !cp.InEffect || cp.DecidedBy != n.main {
				// 2.x merges per key: the drop-in does not take it away.
				t.Errorf("2.x config_path: %+v, want in effect from %s", cp, n.main)
			}
			if !sb.InEffect || sb.DecidedBy != dropin {
				t.Errorf("sandbox image: %+v, want in effect, decided by %s", sb, dropin)
			}
			if !cg.InEffect {
				t.Errorf("runc SystemdCgroup: %+v, want in effect", cg)
			}
		})
	}
}

// TestRuntimeTakenAway: nvidia-ctk's drop-in on containerd 1.x holds a
// runtimes table with only nvidia, so the default runtime runc is gone and
// the CRI plugin will not load. Declaring runc brings it back, in the file
// that owns the CRI table; the fields the new runtime prints at their zero
// value are not undeclared changes.
func TestRuntimeTakenAway(t *testing.T) {
	ctk := strings.Replace(nvidiaCTKDropin, `    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
`, "", 1)
	if ctk == nvidiaCTKDropin {
		t.Fatal("anchor for runc not found")
	}
	n := newNode(t, labtest.Containerd16, incidentMain, map[string]string{"99-nvidia.toml": ctk})
	a := n.args("cri.runtimes.runc.runtime_type: io.containerd.runc.v2\ncri.runtimes.runc.options.SystemdCgroup: true\n")
	p := n.converge(a)
	dropin := filepath.Join(n.confd, "99-nvidia.toml")
	if len(p.Files) != 1 || p.Files[0].Path != dropin {
		t.Fatalf("plan writes %v, want %s", p.Files, dropin)
	}
	dump := n.dump()
	if !strings.Contains(dump, `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`) || !strings.Contains(dump, `BinaryName = "/usr/bin/nvidia-container-runtime"`) {
		t.Errorf("dump lacks runc, or lost nvidia:\n%s", dump)
	}
}

// TestVersion1File: an unversioned config that names the CRI plugin `cri`
// (nvidia-container-toolkit's v1 test config). A key written under the long
// id collides with the file's `cri` table, which containerd migrates to that
// id, and never takes effect; written under `cri` it does, on 1.x and 2.x.
func TestVersion1File(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "e2e", "testdata", "corpus", "nvidia-toolkit-test-config-v1", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range generations {
		t.Run(string(g), func(t *testing.T) {
			n := newNode(t, g, string(src), nil)
			a := n.args("cri.sandbox_image: registry.k8s.io/pause:3.9\ncri.runtimes.runc.options.SystemdCgroup: true\n")
			p := n.converge(a)
			if after := string(p.Files[0].After); !strings.Contains(after, "[plugins.cri.containerd.runtimes.runc.options]") && !strings.Contains(after, "sandbox_image = \"registry.k8s.io/pause:3.9\"") {
				t.Errorf("not written under cri:\n%s", after)
			}
			if d := n.dump(); !strings.Contains(d, "registry.k8s.io/pause:3.9") {
				t.Errorf("dump lacks the sandbox image:\n%s", d)
			}
		})
	}
}
