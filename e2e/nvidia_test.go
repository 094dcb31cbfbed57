package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"nodeconverge/lab/labtest"
)

// The GPU Operator's three runtimes and the binaries the lab installs.
var operatorRuntimes = map[string]string{
	"nvidia":        "/usr/local/nvidia/toolkit/nvidia-container-runtime",
	"nvidia-cdi":    "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi",
	"nvidia-legacy": "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy",
}

// nvidiaLab starts one node without containerd running (`config dump` needs
// no daemon) and with no config files; the test writes them.
func nvidiaLab(t *testing.T, gen labtest.Generation) (*labtest.Lab, string) {
	t.Helper()
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "none", NoContainerd: true, ContainerdBin: labtest.Containerd(t, gen)})
	return l, l.Nodes[0].Name
}

// writeNodeFile writes a file the node sees at abs.
func writeNodeFile(t *testing.T, l *labtest.Lab, node, abs, content string) {
	t.Helper()
	p := l.NodePath(node, abs)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readNodeFile(t *testing.T, l *labtest.Lab, node, abs string) string {
	t.Helper()
	b, err := os.ReadFile(l.NodePath(node, abs))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// effectiveRuntime is one runtime handler of the node's own dump.
type effectiveRuntime struct {
	Type    string
	Options map[string]any
	// BinaryName and SystemdCgroup as the daemon decodes the options.
	BinaryName    string
	SystemdCgroup bool
}

// nodeRuntimes dumps the node's effective config with its own containerd and
// returns its CRI runtimes, their options decoded as that containerd decodes
// them into the runc shim's options: 2.x marshals the options map with
// go-toml/v2 and unmarshals it into the struct (keys match fields without
// regard to case; of two spellings the later key in the marshalled text
// wins); 1.x (go-toml v1) looks a field up under its name, lower case, upper
// case and first-letter-lower, and takes the first that exists.
func nodeRuntimes(t *testing.T, l *labtest.Lab, node string, gen labtest.Generation) map[string]effectiveRuntime {
	t.Helper()
	dump := l.Exec(t, node, "containerd", "config", "dump")
	var cfg map[string]any
	if err := toml.Unmarshal([]byte(dump), &cfg); err != nil {
		t.Fatalf("parse dump: %v\n%s", err, dump)
	}
	plugin := "io.containerd.grpc.v1.cri"
	if gen == labtest.Containerd2 {
		plugin = "io.containerd.cri.v1.runtime"
	}
	var node0 any = cfg
	for _, k := range []string{"plugins", plugin, "containerd", "runtimes"} {
		m, _ := node0.(map[string]any)
		node0 = m[k]
	}
	rts, _ := node0.(map[string]any)
	out := map[string]effectiveRuntime{}
	for name, v := range rts {
		m, _ := v.(map[string]any)
		r := effectiveRuntime{}
		r.Type, _ = m["runtime_type"].(string)
		r.Options, _ = m["options"].(map[string]any)
		if gen == labtest.Containerd2 {
			b, err := toml.Marshal(r.Options)
			if err != nil {
				t.Fatal(err)
			}
			var dec struct {
				BinaryName    string
				SystemdCgroup bool
			}
			if err := toml.Unmarshal(b, &dec); err != nil {
				t.Fatalf("decode options of %s as containerd 2.x does: %v", name, err)
			}
			r.BinaryName, r.SystemdCgroup = dec.BinaryName, dec.SystemdCgroup
		} else {
			get := func(field string) any {
				for _, k := range []string{field, strings.ToLower(field), strings.ToUpper(field), strings.ToLower(field[:1]) + field[1:]} {
					if v, ok := r.Options[k]; ok {
						return v
					}
				}
				return nil
			}
			r.BinaryName, _ = get("BinaryName").(string)
			r.SystemdCgroup, _ = get("SystemdCgroup").(bool)
		}
		out[name] = r
	}
	return out
}

// wantOperatorRuntimes fails unless exactly the GPU Operator's three nvidia
// runtimes are effective (besides the names in others), each decoding to its
// toolkit binary, with no two option keys that collide without regard to
// case.
func wantOperatorRuntimes(t *testing.T, rts map[string]effectiveRuntime, others ...string) {
	t.Helper()
	var names []string
	for n := range rts {
		names = append(names, n)
	}
	sort.Strings(names)
	want := append([]string{"nvidia", "nvidia-cdi", "nvidia-legacy"}, others...)
	sort.Strings(want)
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("effective runtimes (-want +got):\n%s", d)
	}
	for n, bin := range operatorRuntimes {
		r := rts[n]
		if r.BinaryName != bin {
			t.Errorf("runtime %s: the daemon decodes BinaryName %q, want %q (options %v)", n, r.BinaryName, bin, r.Options)
		}
		seen := map[string]string{}
		for k := range r.Options {
			if prev, ok := seen[strings.ToLower(k)]; ok {
				t.Errorf("runtime %s: option keys %s and %s collide without regard to case", n, prev, k)
			}
			seen[strings.ToLower(k)] = k
		}
	}
}

// nvidiaPlay is a playbook of one containerd_nvidia task with the given
// argument lines (indented under the module).
func nvidiaPlay(t *testing.T, node string, args ...string) string {
	t.Helper()
	return writePlaybook(t, `
- name: nvidia
  hosts: `+node+`
  tasks:
    - name: nvidia runtimes
      containerd_nvidia:
        `+strings.Join(args, "\n        ")+`
`)
}

// convergeTwice runs check then apply (they must agree), asserts apply
// succeeded, and a second apply changes nothing.
func convergeTwice(t *testing.T, l *labtest.Lab, node, pb string) (check, apply result) {
	t.Helper()
	check, apply = checkThenApply(t, l, pb)
	wantCode(t, apply, 0)
	before := l.HashTree(t, node)
	again := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, again, 0)
	if strings.Contains(again.stdout, "changed: [") {
		t.Fatalf("second apply changed something:\n%s", again)
	}
	if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
		t.Fatalf("second apply changed files:\n%s", d)
	}
	return check, apply
}

// mainWithImports is a main config of the given version importing conf.d.
func mainWithImports(version int) string {
	if version == 3 {
		return "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n"
	}
	return "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n"
}

// TestNvidiaOptionKeysDecoded (issue 10, defect 2): the runc options are
// spelled binaryName/systemdCgroup (kubespray's spelling). The nvidia
// runtimes built from runc's options must not carry a second spelling of
// BinaryName: on 2.x the options are decoded case-insensitively and the
// later key wins, so BinaryName + binaryName ran plain runc. 1.6 is run as
// well, with the runtimes in the main config (1.x replaces the CRI table per
// file), to assert what it decodes.
func TestNvidiaOptionKeysDecoded(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l, node := nvidiaLab(t, g.gen)
			plugin, path := `"io.containerd.cri.v1.runtime"`, "/etc/containerd/conf.d/99-nvidia.toml"
			main := mainWithImports(3)
			if g.gen == labtest.Containerd16 {
				plugin, path, main = `"io.containerd.grpc.v1.cri"`, "/etc/containerd/config.toml", mainWithImports(2)
			}
			writeNodeFile(t, l, node, "/etc/containerd/config.toml", main+`
[plugins.`+plugin+`.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins.`+plugin+`.containerd.runtimes.runc.options]
    binaryName = "/usr/local/bin/runc"
    systemdCgroup = true
`)
			if g.gen == labtest.Containerd2 {
				// The GPU Operator's drop-in exists, still without runtimes.
				writeNodeFile(t, l, node, path, "version = 3\n")
			}
			pb := nvidiaPlay(t, node, "path: "+path, "state: present")
			_, r := convergeTwice(t, l, node, pb)
			rts := nodeRuntimes(t, l, node, g.gen)
			wantOperatorRuntimes(t, rts, "runc")
			for n := range operatorRuntimes {
				if !rts[n].SystemdCgroup {
					t.Errorf("runtime %s: SystemdCgroup as decoded is false; runc's systemdCgroup = true was not carried over: %v", n, rts[n].Options)
				}
			}
			if rts["runc"].BinaryName != "/usr/local/bin/runc" {
				t.Errorf("runc: the daemon decodes BinaryName %q, want its own /usr/local/bin/runc", rts["runc"].BinaryName)
			}
			if strings.Contains(readNodeFile(t, l, node, path), "binaryName") && strings.Contains(readNodeFile(t, l, node, path), "nvidia-container-runtime") && g.gen == labtest.Containerd2 {
				t.Errorf("the drop-in repeats runc's binaryName:\n%s", readNodeFile(t, l, node, path))
			}
			_ = r
		})
	}
}

// TestNvidiaLayoutMeasured (issue 10, defect 4): on containerd 2.x, a main
// config of version 3 and a drop-in of version 2 holding a stale nvidia
// runtime in the io.containerd.grpc.v1.cri layout. The module writes the
// layout it measured to take effect, and the effective result is exactly
// the three runtimes.
func TestNvidiaLayoutMeasured(t *testing.T) {
	l, node := nvidiaLab(t, labtest.Containerd2)
	writeNodeFile(t, l, node, "/etc/containerd/config.toml", mainWithImports(3)+`
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
    SystemdCgroup = true
`)
	writeNodeFile(t, l, node, "/etc/containerd/conf.d/99-nvidia.toml", `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/local/nvidia/toolkit/old-runtime"
`)
	pb := nvidiaPlay(t, node, "path: /etc/containerd/conf.d/99-nvidia.toml", "state: present")
	_, r := convergeTwice(t, l, node, pb)
	wantOperatorRuntimes(t, nodeRuntimes(t, l, node, labtest.Containerd2), "runc")
	got := readNodeFile(t, l, node, "/etc/containerd/conf.d/99-nvidia.toml")
	if strings.Contains(got, "io.containerd.grpc.v1.cri") || !strings.Contains(got, "version = 3") {
		t.Errorf("the drop-in should be in the version 3 layout of its main config:\n%s\n%s", got, r)
	}

	// With a file containerd does not load, the diagnosis says so instead
	// of blaming a later drop-in that does not exist.
	if err := os.Remove(l.NodePath(node, "/etc/containerd/conf.d/99-nvidia.toml")); err != nil {
		t.Fatal(err)
	}
	bad := nvidiaPlay(t, node, "path: /etc/containerd/elsewhere/99-nvidia.toml", "state: present")
	r = nc(t, append([]string{"apply"}, labArgs(l, bad)...)...)
	wantCode(t, r, 1)
	if strings.Contains(r.stdout, "probably owns") || !strings.Contains(r.stdout, "does not load /etc/containerd/elsewhere/99-nvidia.toml") {
		t.Fatalf("want a diagnosis naming the measured cause:\n%s", r)
	}
}

// TestNvidiaPlacementAuto (issue 10, defect 5): containerd 1.6, a
// config.toml with its own CRI settings and no drop-in. A new drop-in would
// replace the whole CRI table, so the shipped playbook's intent (runtimes
// where they take effect) puts them into config.toml, the file that owns
// the CRI plugin; every other effective value stays.
func TestNvidiaPlacementAuto(t *testing.T) {
	l, node := nvidiaLab(t, labtest.Containerd16)
	writeNodeFile(t, l, node, "/etc/containerd/config.toml", mainWithImports(2)+`
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
`)
	before := l.Exec(t, node, "containerd", "config", "dump")
	pb := writePlaybook(t, strings.Replace(mustRead(t, shippedPlaybook()), "hosts: gpu", "hosts: "+node, 1))
	_, r := convergeTwice(t, l, node, pb)
	wantOperatorRuntimes(t, nodeRuntimes(t, l, node, labtest.Containerd16), "runc")
	after := l.Exec(t, node, "containerd", "config", "dump")
	for _, want := range []string{`sandbox_image = "registry.k8s.io/pause:3.9"`, `config_path = "/etc/containerd/certs.d"`} {
		if !strings.Contains(before, want) || !strings.Contains(after, want) {
			t.Errorf("%s not effective before and after:\n%s", want, r)
		}
	}
	if _, err := os.Stat(l.NodePath(node, "/etc/containerd/conf.d/99-nvidia.toml")); err == nil {
		t.Errorf("a drop-in was created on 1.6 although config.toml owns the CRI plugin")
	}
	if !strings.Contains(readNodeFile(t, l, node, "/etc/containerd/config.toml"), "runtimes.nvidia-cdi") {
		t.Errorf("config.toml should hold the runtimes")
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNvidiaForeignRuntimesKept (issue 10, defect 7): k3s's
// nvidia-experimental and microk8s's nvidia-container-runtime are not the
// module's: they stay effective and are reported, on both generations.
func TestNvidiaForeignRuntimesKept(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l, node := nvidiaLab(t, g.gen)
			plugin, version := `"io.containerd.grpc.v1.cri"`, 2
			if g.gen == labtest.Containerd2 {
				plugin, version = `"io.containerd.cri.v1.runtime"`, 3
			}
			writeNodeFile(t, l, node, "/etc/containerd/config.toml", mainWithImports(version)+`
[plugins.`+plugin+`.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.`+plugin+`.containerd.runtimes."nvidia-experimental"]
  runtime_type = "io.containerd.runc.v2"
[plugins.`+plugin+`.containerd.runtimes."nvidia-experimental".options]
  BinaryName = "/usr/bin/nvidia-container-runtime-experimental"

[plugins.`+plugin+`.containerd.runtimes.nvidia-container-runtime]
  runtime_type = "io.containerd.runc.v2"
[plugins.`+plugin+`.containerd.runtimes.nvidia-container-runtime.options]
  BinaryName = "nvidia-container-runtime"
`)
			pb := nvidiaPlay(t, node, "path: /etc/containerd/config.toml", "state: present")
			check, _ := convergeTwice(t, l, node, pb)
			rts := nodeRuntimes(t, l, node, g.gen)
			wantOperatorRuntimes(t, rts, "runc", "nvidia-experimental", "nvidia-container-runtime")
			if rts["nvidia-experimental"].BinaryName != "/usr/bin/nvidia-container-runtime-experimental" || rts["nvidia-container-runtime"].BinaryName != "nvidia-container-runtime" {
				t.Errorf("foreign runtimes changed: %+v %+v", rts["nvidia-experimental"], rts["nvidia-container-runtime"])
			}
			_ = check
			v := nc(t, append([]string{"apply", "--check", "-v"}, labArgs(l, pb)...)...)
			if !strings.Contains(v.stdout, "nvidia-container-runtime, nvidia-experimental are not managed") {
				t.Errorf("the plan should report the runtimes it leaves alone:\n%s", v)
			}
		})
	}
}

// TestNvidiaLineEdits (issue 10, defect 9), on both generations: CRLF line
// endings with the nvidia tables pasted twice are repaired; operator
// comments and a registry table that follow the paste are kept; the owner
// and mode of the file are kept.
func TestNvidiaLineEdits(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l, node := nvidiaLab(t, g.gen)
			plugin, version := `"io.containerd.grpc.v1.cri"`, 2
			if g.gen == labtest.Containerd2 {
				plugin, version = `"io.containerd.cri.v1.runtime"`, 3
			}
			paste := `
# nvidia runtime (appended)
[plugins.` + plugin + `.containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins.` + plugin + `.containerd.runtimes.nvidia.options]
  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
`
			src := mainWithImports(version) + `
[plugins.` + plugin + `.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
` + paste + paste + `
# Operator: the registry mirrors below are managed by hand.
# Ticket OPS-1234; do not remove.

[plugins.` + plugin + `.cni]
  conf_dir = "/etc/cni/net.d"
`
			src = strings.ReplaceAll(src, "\n", "\r\n")
			writeNodeFile(t, l, node, "/etc/containerd/config.toml", src)
			p := l.NodePath(node, "/etc/containerd/config.toml")
			if err := os.Chown(p, 1234, 2345); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o600); err != nil {
				t.Fatal(err)
			}
			pb := nvidiaPlay(t, node, "path: /etc/containerd/config.toml", "state: present")
			convergeTwice(t, l, node, pb)
			wantOperatorRuntimes(t, nodeRuntimes(t, l, node, g.gen), "runc")
			got := readNodeFile(t, l, node, "/etc/containerd/config.toml")
			if strings.Count(got, "\r\n") != strings.Count(got, "\n") {
				t.Errorf("line endings changed:\n%q", got)
			}
			for _, c := range []string{"# Operator: the registry mirrors below are managed by hand.", "# Ticket OPS-1234; do not remove.", "conf_dir = \"/etc/cni/net.d\""} {
				if !strings.Contains(got, c) {
					t.Errorf("%q lost:\n%s", c, got)
				}
			}
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 1234 || sys.Gid != 2345 || st.Mode().Perm() != 0o600 {
				t.Errorf("owner %d:%d mode %v, want 1234:2345 0600", sys.Uid, sys.Gid, st.Mode().Perm())
			}
		})
	}
}

// TestNvidiaPastedTwiceIncident (issue 28 #3): the incident's own drop-in
// with its nvidia block appended a second time (no containerd loads it),
// converged by state present through the runner, with an explicit path and
// with path auto, on both generations: one apply converges (the runner's
// re-check after apply plans nothing, else the host would be rolled back),
// the second apply changes nothing, and every runtime keeps the operator's
// SystemdCgroup = true.
func TestNvidiaPastedTwiceIncident(t *testing.T) {
	inc := filepath.Join(labtest.RepoRoot(), "lab", "scenarios", "incident")
	op := mustRead(t, filepath.Join(inc, "99-nvidia.toml"))
	i := strings.Index(op, `        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]`)
	j := strings.Index(op, `        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi]`)
	if i < 0 || j < i {
		t.Fatal("the incident's drop-in changed: no nvidia block to paste")
	}
	for _, g := range generations {
		for _, path := range []string{"/etc/containerd/conf.d/99-nvidia.toml", "auto"} {
			t.Run(g.name+"/"+filepath.Base(path), func(t *testing.T) {
				l, node := nvidiaLab(t, g.gen)
				writeNodeFile(t, l, node, "/etc/containerd/config.toml", mustRead(t, filepath.Join(inc, "config.toml")))
				writeNodeFile(t, l, node, "/etc/containerd/conf.d/99-nvidia.toml", op+"\n"+op[i:j])
				convergeTwice(t, l, node, nvidiaPlay(t, node, "path: "+path, "state: present"))
				rts := nodeRuntimes(t, l, node, g.gen)
				for _, name := range []string{"nvidia", "nvidia-cdi", "nvidia-legacy", "runc"} {
					rt, ok := rts[name]
					if !ok {
						t.Errorf("%s missing: %+v", name, rts)
						continue
					}
					if !rt.SystemdCgroup {
						t.Errorf("%s options %v: SystemdCgroup = true lost", name, rt.Options)
					}
				}
			})
		}
	}
}
