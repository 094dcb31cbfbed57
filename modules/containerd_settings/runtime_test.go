package containerdsettings

import (
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
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
