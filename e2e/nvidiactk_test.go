package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"
)

// nvidiaCTKConfigure is `nvidia-ctk runtime configure` as NVIDIA's install guide runs it for
// containerd ("Configuring containerd": `sudo nvidia-ctk runtime configure --runtime=containerd`, then
// restart containerd). Measured with v1.20.2 (docs/nvidia-ctk.md): with no other flag it reads
// /etc/containerd/config.toml alone (--config-source=file), seeds the drop-in
// /etc/containerd/conf.d/99-nvidia.toml (--drop-in-config's default) with that file's whole CRI table
// plus an `nvidia` runtime, overwriting whatever the drop-in held, and rewrites config.toml to import
// conf.d. So whatever only the old drop-in carried is gone.
var nvidiaCTKConfigure = []string{"runtime", "configure", "--runtime=containerd"}

// declaredValue is one value the shipped playbook declares must be effective (issue 12), found in a
// flattened config by key suffix so one entry serves a dump of either generation and a file of
// either config version.
type declaredValue struct {
	name     string   // what check mode must say when it is lost
	suffixes []string // Flatten key suffixes that carry it
	value    string   // Flatten's text of the declared value
}

// declaredValues is the incident's whole intent as the shipped playbook declares it: the registry's
// certs.d, the sandbox image, runc's systemd cgroups, and the GPU Operator's three runtimes with their
// toolkit binaries.
var declaredValues = func() []declaredValue {
	v := []declaredValue{
		{name: "config_path", suffixes: []string{".registry.config_path"}, value: `"/etc/containerd/certs.d"`},
		{name: "sandbox", suffixes: []string{".sandbox_image", ".pinned_images.sandbox"}, value: `"registry.k8s.io/pause:3.9"`},
		{name: "SystemdCgroup", suffixes: []string{".runtimes.runc.options.SystemdCgroup"}, value: "true"},
	}
	names := make([]string, 0, len(operatorRuntimes))
	for n := range operatorRuntimes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v = append(v, declaredValue{
			// The runtime's key, not its bare name: "nvidia" is in every line about any of them.
			name:     "runtimes." + ctrconf.JoinKey(n) + ".",
			suffixes: []string{".runtimes." + ctrconf.JoinKey(n) + ".options.BinaryName"},
			value:    `"` + operatorRuntimes[n] + `"`,
		})
	}
	return v
}()

// in reports whether the flattened config carries the declared value.
func (d declaredValue) in(flat map[string]string) bool {
	for k, v := range flat {
		for _, s := range d.suffixes {
			if strings.HasSuffix(k, s) && v == d.value {
				return true
			}
		}
	}
	return false
}

// effectiveFlat is the node's effective config, dumped by its own containerd and flattened.
func effectiveFlat(t *testing.T, l *labtest.Lab, node string) map[string]string {
	t.Helper()
	dump := l.Exec(t, node, "containerd", "config", "dump")
	var m map[string]any
	if err := toml.Unmarshal([]byte(dump), &m); err != nil {
		t.Fatalf("%s: the dump does not parse: %v\n%s", node, err, dump)
	}
	return ctrconf.Flatten(m)
}

// missingDeclared lists the declared values the flattened config does not carry.
func missingDeclared(flat map[string]string) []string {
	var out []string
	for _, d := range declaredValues {
		if !d.in(flat) {
			out = append(out, d.name)
		}
	}
	return out
}

// containerdFiles returns every regular file under the node's /etc/containerd, by the path the node
// sees, with its content.
func containerdFiles(t *testing.T, l *labtest.Lab, node string) map[string]string {
	t.Helper()
	root := l.NodePath(node, "/etc/containerd")
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out[filepath.Join("/etc/containerd", rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatalf("%s: read /etc/containerd: %v", node, err)
	}
	return out
}

// flatFile flattens one config file's own content. A file that is not TOML (a note, or a config
// broken by a tool) carries no value, which is what containerd would make of it too.
func flatFile(content string) map[string]string {
	var m map[string]any
	if err := toml.Unmarshal([]byte(content), &m); err != nil {
		return nil
	}
	return ctrconf.Flatten(m)
}

// losingFiles returns, for each declared value, the files that carried it before and no longer do.
func losingFiles(before, after map[string]string) map[string][]string {
	out := map[string][]string{}
	for path, b := range before {
		a, stays := after[path]
		if stays && a == b {
			continue
		}
		fb, fa := flatFile(b), flatFile(a)
		for _, d := range declaredValues {
			if d.in(fb) && !d.in(fa) {
				out[d.name] = append(out[d.name], path)
			}
		}
	}
	for _, files := range out {
		sort.Strings(files)
	}
	return out
}

// runNvidiaCTK runs NVIDIA's nvidia-ctk in the node's mount namespace, as the install guide says,
// then restarts containerd (the guide's next step) so the daemon runs what the tool wrote, and logs
// whether the CRI plugin loaded. That is not a precondition: on a fresh 1.6 node the tool's drop-in,
// whose runtimes table holds only nvidia, replaces the CRI table, so runc (the default runtime) is
// gone and the CRI plugin fails to load (docs/nvidia-ctk.md); converging must recover from that too.
func runNvidiaCTK(t *testing.T, l *labtest.Lab, node string) {
	t.Helper()
	l.Exec(t, node, append([]string{labtest.NvidiaCTK(t)}, nvidiaCTKConfigure...)...)
	l.Exec(t, node, "systemctl", "restart", "containerd")
	plugins, err := l.TryExec(node, "ctr", "plugins", "ls")
	t.Logf("after nvidia-ctk and a restart, CRI plugin ok: %v (ctr error: %v)", criOK.MatchString(plugins), err)
}

// wantCRIUp fails unless the node's containerd is active with its CRI plugin ok.
func wantCRIUp(t *testing.T, l *labtest.Lab, node, when string) {
	t.Helper()
	if st := strings.TrimSpace(l.Exec(t, node, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
		t.Fatalf("%s: containerd is %s %s", node, st, when)
	}
	if plugins := l.Exec(t, node, "ctr", "plugins", "ls"); !criOK.MatchString(plugins) {
		t.Fatalf("%s: CRI plugin not ok %s:\n%s", node, when, plugins)
	}
}

// wantNoChange runs apply again and fails unless it changes nothing, in its words and on disk.
func wantNoChange(t *testing.T, l *labtest.Lab, node, pb string) {
	t.Helper()
	before := l.HashTree(t, node)
	again := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, again, 0)
	if strings.Contains(again.stdout, "changed: [") {
		t.Fatalf("a second apply changed something:\n%s", again)
	}
	if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
		t.Fatalf("a second apply changed files:\n%s", d)
	}
}

// TestNvidiaCTK (issue 12): NVIDIA's real nvidia-ctk, run as its install guide runs it, against the
// shipped playbook, on containerd 1.6 and 2.x, in both orders.
//
// After nodeconverge converged the incident's node, nvidia-ctk rewrites 99-nvidia.toml from
// config.toml's CRI table: on 1.6 the registry config_path that only the old drop-in carried is lost
// (the defect), with the nvidia-cdi and nvidia-legacy runtimes; whatever it loses, check
// mode must exit 2 naming each lost value and the file that lost it, apply must bring them back with
// containerd healthy, and a second apply must change nothing. The other order: nvidia-ctk on a fresh
// node, then the playbook converges it to the whole intent.
func TestNvidiaCTK(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			t.Run("after-nodeconverge", func(t *testing.T) {
				l := labtest.Start(t, labtest.Options{Names: []string{"nuc1"}, Scenario: "incident", ContainerdBin: labtest.Containerd(t, g.gen)})
				node, pb := "nuc1", shippedPlaybook()
				wantCode(t, nc(t, append([]string{"apply"}, labArgs(l, pb)...)...), 0)
				if miss := missingDeclared(effectiveFlat(t, l, node)); len(miss) > 0 {
					t.Fatalf("the shipped playbook left declared values not effective: %v", miss)
				}

				filesBefore, effBefore := containerdFiles(t, l, node), effectiveFlat(t, l, node)
				runNvidiaCTK(t, l, node)
				filesAfter, effAfter := containerdFiles(t, l, node), effectiveFlat(t, l, node)
				var lost []string
				for _, d := range declaredValues {
					if d.in(effBefore) && !d.in(effAfter) {
						lost = append(lost, d.name)
					}
				}
				t.Logf("nvidia-ctk %s: lost %v; files it changed: %v", strings.Join(nvidiaCTKConfigure, " "), lost, changedFiles(filesBefore, filesAfter))
				if len(lost) == 0 {
					t.Fatalf("nvidia-ctk took no declared value away; the scenario tests nothing")
				}
				if g.gen == labtest.Containerd16 && !slices.Contains(lost, "config_path") {
					t.Fatalf("on 1.6 nvidia-ctk v1.20.2 loses the registry config_path (measured; docs/nvidia-ctk.md), now it lost %v", lost)
				}
				losers := losingFiles(filesBefore, filesAfter)

				check, apply := checkThenApply(t, l, pb)
				wantCode(t, check, 2)
				for _, name := range lost {
					if !strings.Contains(check.stdout, name) {
						t.Errorf("check mode does not name the lost %s:\n%s", name, check)
					}
					files := losers[name]
					if len(files) == 0 {
						t.Errorf("no file nvidia-ctk changed carried %s before; cannot say which file lost it", name)
					}
					for _, f := range files {
						if !strings.Contains(check.stdout, f) {
							t.Errorf("check mode does not name %s, the file that lost %s:\n%s", f, name, check)
						}
					}
				}
				wantCode(t, apply, 0)
				if miss := missingDeclared(effectiveFlat(t, l, node)); len(miss) > 0 {
					t.Errorf("after apply, declared values not effective: %v\n%s", miss, apply)
				}
				wantOperatorRuntimes(t, nodeRuntimes(t, l, node, g.gen), "runc")
				wantCRIUp(t, l, node, "after apply")
				wantNoChange(t, l, node, pb)
			})

			t.Run("before-nodeconverge", func(t *testing.T) {
				l := labtest.Start(t, labtest.Options{Names: []string{"nuc1"}, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
				node, pb := "nuc1", shippedPlaybook()
				runNvidiaCTK(t, l, node)
				if _, err := os.Stat(l.NodePath(node, "/etc/containerd/conf.d/99-nvidia.toml")); err != nil {
					t.Fatalf("nvidia-ctk did not write its drop-in: %v", err)
				}

				check, apply := checkThenApply(t, l, pb)
				wantCode(t, check, 2)
				wantCode(t, apply, 0)
				if miss := missingDeclared(effectiveFlat(t, l, node)); len(miss) > 0 {
					t.Errorf("after apply, declared values not effective: %v\n%s", miss, apply)
				}
				wantOperatorRuntimes(t, nodeRuntimes(t, l, node, g.gen), "runc")
				wantCRIUp(t, l, node, "after apply")
				wantNoChange(t, l, node, pb)
			})
		})
	}
}

// changedFiles lists the files whose content differs between two readings (created and removed ones
// included).
func changedFiles(before, after map[string]string) []string {
	var out []string
	for p, b := range before {
		if a, ok := after[p]; !ok || a != b {
			out = append(out, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
