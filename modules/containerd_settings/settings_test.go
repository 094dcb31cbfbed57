package containerdsettings

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"

	"github.com/pelletier/go-toml/v2"
	"gopkg.in/yaml.v3"
)

func yamlUnmarshal(s string, v any) error { return yaml.Unmarshal([]byte(s), v) }

var generations = []labtest.Generation{labtest.Containerd16, labtest.Containerd2}

// testNode is a containerd config tree in a temporary directory, measured with
// a real containerd binary through the local transport (the same scripts
// an SSH node runs).
type testNode struct {
	t                *testing.T
	dir, main, confd string
	bin              string
	h                *node.Host
}

func newNode(t *testing.T, g labtest.Generation, mainBody string, dropins map[string]string) *testNode {
	t.Helper()
	dir := t.TempDir()
	n := &testNode{t: t, dir: dir, main: filepath.Join(dir, "config.toml"), confd: filepath.Join(dir, "conf.d"), bin: labtest.Containerd(t, g)}
	if err := os.MkdirAll(n.confd, 0o755); err != nil {
		t.Fatal(err)
	}
	n.write(n.main, strings.ReplaceAll(mainBody, "CONFD", n.confd))
	for name, body := range dropins {
		n.write(filepath.Join(n.confd, name), body)
	}
	n.h = node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(dir, "state"), RunID: "20260101T000000Z-test"})
	return n
}

func (n *testNode) write(p, body string) {
	n.t.Helper()
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *testNode) read(p string) string {
	n.t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		n.t.Fatal(err)
	}
	return string(b)
}

// args decodes a settings mapping written as in a playbook.
func (n *testNode) args(settings string) *Args {
	n.t.Helper()
	a := Module{}.NewArgs().(*Args)
	a.Config, a.Containerd, a.Dropin = n.main, n.bin, filepath.Join(n.confd, "50-nodeconverge.toml")
	var s Settings
	if err := yamlUnmarshal(settings, &s); err != nil {
		n.t.Fatalf("settings: %v", err)
	}
	a.Settings = s
	if err := a.Validate(); err != nil {
		n.t.Fatal(err)
	}
	return a
}

// check runs Check on a fresh Host: a Host caches what it read until it
// writes itself, and these tests write behind its back.
func (n *testNode) check(a *Args) (*module.Plan, error) {
	n.h = node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(n.dir, "state"), RunID: "20260101T000000Z-test"})
	return Module{}.Check(context.Background(), transport.ReadOnly(n.h), a)
}

func (n *testNode) apply(p *module.Plan) {
	n.t.Helper()
	if _, err := (Module{}).Apply(context.Background(), n.h, p); err != nil {
		n.t.Fatalf("apply: %v", err)
	}
}

// dump is the node's effective config as the real daemon prints it.
func (n *testNode) dump() string {
	n.t.Helper()
	out, err := exec.Command(n.bin, "--config", n.main, "config", "dump").Output()
	if err != nil {
		n.t.Fatalf("config dump: %v", err)
	}
	return string(out)
}

// converge checks, applies and proves the second check plans nothing.
func (n *testNode) converge(a *Args) *module.Plan {
	n.t.Helper()
	p, err := n.check(a)
	if err != nil {
		n.t.Fatalf("check: %v", err)
	}
	if len(p.Files) == 0 {
		n.t.Fatalf("check plans nothing; notes:\n%s", strings.Join(p.Notes, "\n"))
	}
	n.apply(p)
	again, err := n.check(a)
	if err != nil {
		n.t.Fatalf("re-check: %v", err)
	}
	if len(again.Files) > 0 {
		n.t.Fatalf("not idempotent: re-check plans %v\n%s", again.Files, strings.Join(again.Notes, "\n"))
	}
	return p
}

const incidentMain = `version = 2
imports = ["CONFD/*.toml"]

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = true
`

// nvidiaCTKDropin is the shape nvidia-ctk writes: a copy of the CRI table
// with the nvidia runtime, and no registry config_path.
const nvidiaCTKDropin = `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        BinaryName = "/usr/bin/nvidia-container-runtime"
        SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
`

// TestValueLostToALaterDropin (issue 12): a drop-in that replaces the CRI
// table without config_path loses the declared value. Check names the
// value and the drop-in that decides it; apply writes the value where it
// takes effect without moving any file, and the real daemon's dump shows it.
func TestValueLostToALaterDropin(t *testing.T) {
	for _, g := range generations {
		t.Run(string(g), func(t *testing.T) {
			n := newNode(t, g, incidentMain, map[string]string{"99-nvidia.toml": nvidiaCTKDropin})
			a := n.args("cri.registry.config_path: /etc/containerd/certs.d\ncri.sandbox_image: registry.k8s.io/pause:3.9\n")
			p := n.converge(a)
			notes := strings.Join(append(p.Drift, p.Notes...), "\n")
			if !strings.Contains(notes, "cri.registry.config_path: not effective") || !strings.Contains(notes, "cri.sandbox_image = \"registry.k8s.io/pause:3.9\": effective") {
				t.Errorf("notes do not say which value is effective:\n%s", notes)
			}
			dropin := filepath.Join(n.confd, "99-nvidia.toml")
			var wantFile string
			if g == labtest.Containerd16 {
				// 1.x: the drop-in owns the whole CRI table; the value goes there.
				wantFile = dropin
				if !strings.Contains(notes, "reset to containerd's default by "+dropin) {
					t.Errorf("1.x notes do not name the drop-in that resets the value:\n%s", notes)
				}
			} else {
				// 2.x: no file sets it; a drop-in of its own.
				wantFile = a.Dropin
			}
			if len(p.Files) != 1 || p.Files[0].Path != wantFile {
				t.Fatalf("plan writes %v, want %s only", p.Files, wantFile)
			}
			if !strings.Contains(n.dump(), "config_path = \"/etc/containerd/certs.d\"") && !strings.Contains(n.dump(), "config_path = '/etc/containerd/certs.d'") {
				t.Errorf("the daemon's dump lacks config_path:\n%s", n.dump())
			}
			if _, err := os.Stat(dropin); err != nil {
				t.Errorf("the drop-in moved: %v", err)
			}
			if !strings.Contains(n.read(dropin), "BinaryName = \"/usr/bin/nvidia-container-runtime\"") {
				t.Error("the drop-in lost its runtime")
			}
		})
	}
}

// TestLaterDropinOverrides: a later drop-in that sets a declared key to
// another value is the file check names, and the one apply edits in place
// (on 1.x it also owns the CRI table; what it hides from the main config is
// containerd_dropins' business and stays as it was).
func TestLaterDropinOverrides(t *testing.T) {
	for _, g := range generations {
		t.Run(string(g), func(t *testing.T) {
			other := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/other.d\"\n"
			main := strings.Replace(incidentMain, "    [plugins.\"io.containerd.grpc.v1.cri\".containerd]", "    [plugins.\"io.containerd.grpc.v1.cri\".registry]\n      config_path = \"/etc/containerd/certs.d\"\n    [plugins.\"io.containerd.grpc.v1.cri\".containerd]", 1)
			n := newNode(t, g, main, map[string]string{"zz-registry.toml": other})
			a := n.args("cri.registry.config_path: /etc/containerd/certs.d\n")
			zz := filepath.Join(n.confd, "zz-registry.toml")
			p := n.converge(a)
			if !strings.Contains(strings.Join(p.Drift, "\n"), "set by "+zz) || len(p.Files) != 1 || p.Files[0].Path != zz {
				t.Fatalf("plan %v notes:\n%s", p.Files, strings.Join(p.Notes, "\n"))
			}
			if got := n.read(zz); got != strings.Replace(other, "other.d", "certs.d", 1) {
				t.Errorf("zz not edited in place:\n%s", got)
			}
		})
	}
}

// TestBadArgumentsAtLoad (issue 12): an unknown key path, a value of the
// wrong type, an option in a spelling containerd versions read differently
// fail when the playbook loads, at the offending line and column.
func TestBadArgumentsAtLoad(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"cri.registry.confg_path: /etc/containerd/certs.d", `unknown key "cri.registry.confg_path"`},
		{"cri.sandbox_image: 3.9", "want a string, got float"},
		{"cri.runtimes.runc.options.SystemdCgroup: \"true\"", "want a boolean, got str"},
		{"cri.runtimes.runc.options.systemdCgroup: true", `spelled "SystemdCgroup"`},
		{"cri.max_container_log_line_size: [1]", "want an integer, got a list"},
		{"cri.runtimes.runc.colour: red", `unknown runtime key "colour"`},
	} {
		pb := filepath.Join(t.TempDir(), "play.yaml")
		body := "- hosts: all\n  tasks:\n    - name: settings\n      containerd_settings:\n        settings:\n          " + c.line + "\n"
		if err := os.WriteFile(pb, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := playbook.Load(pb)
		// The error names the line of the setting and the column of its
		// key (the loader locates errors by line), and the message the key.
		at := ":6:11:"
		if err == nil || !strings.Contains(err.Error(), pb+at) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Load = %v, want %s%s ... %s", c.line, err, pb, at, c.want)
		}
	}
	pb := filepath.Join(t.TempDir(), "play.yaml")
	if err := os.WriteFile(pb, []byte("- hosts: all\n  tasks:\n    - containerd_settings:\n        settings:\n          cri.registry.config_path: /etc/containerd/certs.d\n          cri.runtimes.nvidia.options.BinaryName: /usr/bin/nvidia-container-runtime\n          cri.cdi_spec_dirs: [/etc/cdi, /var/run/cdi]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := playbook.Load(pb); err != nil {
		t.Errorf("a valid playbook does not load: %v", err)
	}
}

// TestOptionSpelling (issue 10, defect 2, for declared options): runc's
// options spelled systemdCgroup (kubespray rendered this for a year) are
// not SystemdCgroup to containerd 1.x and are to 2.x; the module reads the
// option as each daemon does and leaves one spelling in the file.
func TestOptionSpelling(t *testing.T) {
	for _, g := range generations {
		t.Run(string(g), func(t *testing.T) {
			main := strings.Replace(incidentMain, "SystemdCgroup = true", "systemdCgroup = false\n          binaryName = \"/usr/local/bin/runc\"", 1)
			n := newNode(t, g, main, nil)
			a := n.args("cri.runtimes.runc.options.SystemdCgroup: true\n")
			p := n.converge(a)
			if len(p.Files) != 1 || p.Files[0].Path != n.main {
				t.Fatalf("plan writes %v, want %s", p.Files, n.main)
			}
			got := n.read(n.main)
			if strings.Contains(got, "systemdCgroup") || !strings.Contains(got, "SystemdCgroup = true") || !strings.Contains(got, `binaryName = "/usr/local/bin/runc"`) {
				t.Errorf("want one spelling, SystemdCgroup = true, binaryName kept:\n%s", got)
			}
		})
	}
}

// TestCatalogueMatchesDaemons: every fixed key path the module accepts is a
// key the real daemons print in `config default`, in the layout each
// reads (1.7 for version 2, which 1.6 shares except for keys added in 1.7;
// 2.x for version 3). A path containerd does not know would never become
// effective and the module would refuse every run.
func TestCatalogueMatchesDaemons(t *testing.T) {
	since17 := map[string]bool{"cri.cdi_spec_dirs": true, "cri.image_pull_progress_timeout": true, "cri.containerd.ignore_blockio_not_enabled_errors": true}
	for _, c := range []struct {
		g     labtest.Generation
		major int
	}{{labtest.Containerd16, 1}, {labtest.Containerd17, 1}, {labtest.Containerd2, 2}} {
		out, err := exec.Command(labtest.Containerd(t, c.g), "config", "default").Output()
		if err != nil {
			t.Fatalf("%s config default: %v", c.g, err)
		}
		var m map[string]any
		if err := toml.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		flat := ctrconf.Flatten(m)
		for name, d := range fixed {
			if c.g == labtest.Containerd16 && since17[name] {
				continue
			}
			if _, ok := flat[ctrconf.JoinKey(d.dumpPath(c.major)...)]; !ok {
				t.Errorf("%s: %s is %s, which containerd %s does not print", name, c.g, ctrconf.JoinKey(d.dumpPath(c.major)...), c.g)
			}
		}
		for key := range runtimeKeys {
			d, err := lookup("cri.runtimes.runc." + key)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := flat[ctrconf.JoinKey(d.dumpPath(c.major)...)]; !ok && !(key == "snapshotter" && c.g == labtest.Containerd16) {
				t.Errorf("runtime key %s: containerd %s prints no %s", key, c.g, ctrconf.JoinKey(d.dumpPath(c.major)...))
			}
		}
	}
}

// TestPlatformFileRefused (issue 28 #4): k0s's generated config (corpus
// k0s-managed, with its SOURCE) is written again by k0s on every start; a
// value that would go into it is refused by name, with where it belongs.
func TestPlatformFileRefused(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "corpus", "k0s-managed", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range generations {
		t.Run(string(g), func(t *testing.T) {
			n := newNode(t, g, string(b), nil)
			_, err := n.check(n.args("cri.registry.config_path: /etc/containerd/certs.d\n"))
			if err == nil || !strings.Contains(err.Error(), n.main+" is generated by k0s") || !strings.Contains(err.Error(), "/etc/k0s/containerd.d/") {
				t.Fatalf("want a refusal naming k0s, got %v", err)
			}
		})
	}
}

// TestV2MainNewDropinOn2x (issue 28 #4): Flatcar's version 2 main config
// (corpus, with SOURCE) importing conf.d on containerd 2.x. A value no file
// sets goes into a new drop-in spelled as the main file spells it
// (version 2), the main file's CRI values stay effective, and a second
// check plans nothing.
func TestV2MainNewDropinOn2x(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "corpus", "flatcar", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, labtest.Containerd2, "imports = [\"CONFD/*.toml\"]\n"+string(b), nil)
	a := n.args("cri.registry.config_path: /etc/containerd/certs.d\ncri.sandbox_image: registry.k8s.io/pause:3.9\n")
	p, err := n.check(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Files) != 1 || p.Files[0].Path != a.Dropin || p.Files[0].Action != module.Create {
		t.Fatalf("plan files %+v", p.Files)
	}
	body := string(p.Files[0].After)
	if !strings.Contains(body, "version = 2") || !strings.Contains(body, `"io.containerd.grpc.v1.cri"`) {
		t.Errorf("the new drop-in is not in the main file's layout:\n%s", body)
	}
	n.write(a.Dropin, body)
	again, err := n.check(a)
	if err != nil || again.Changed() {
		t.Fatalf("second check: %v %+v", err, again)
	}
}
