package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// Minimal cases of issue 10 (defects 3, 6, 8, 9) and issue 11 (item 11) on
// lab nodes, asserted with the nodes' own dumps and file hashes.

func scenarioFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "lab", "scenarios", "incident", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func putFile(t *testing.T, l *labtest.Lab, node, path, content string) {
	t.Helper()
	p := l.NodePath(node, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func dropinsPlaybook(t *testing.T, node, extra string) string {
	return writePlaybook(t, `
- name: dropins
  hosts: `+node+`
  tasks:
    - name: relocate drop-ins that shadow earlier settings
      containerd_dropins:
        protect: [99-nvidia.toml]
`+extra)
}

var nvidiaBins = []string{"nvidia-container-runtime", "nvidia-container-runtime.cdi", "nvidia-container-runtime.legacy"}

func wantRuntimes(t *testing.T, l *labtest.Lab, node string) string {
	t.Helper()
	dump := l.Exec(t, node, "containerd", "config", "dump")
	for _, bin := range nvidiaBins {
		if !regexp.MustCompile(`BinaryName = ["']/usr/local/nvidia/toolkit/` + regexp.QuoteMeta(bin) + `["']`).MatchString(dump) {
			t.Errorf("%s: %s is not effective:\n%s", node, bin, dump)
		}
	}
	return dump
}

// Issue 10, defect 3: creating 99-nvidia.toml adds a file to `imports`;
// that is not a setting the task alters, so it is not refused for it.
func TestNewDropinImportsNotASetting(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "none", NoContainerd: true, ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			putFile(t, l, node, "/etc/containerd/config.toml", "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n")
			if err := os.MkdirAll(l.NodePath(node, "/etc/containerd/conf.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			pb := writePlaybook(t, `
- name: nvidia
  hosts: `+node+`
  tasks:
    - name: nvidia runtimes in the GPU Operator's drop-in
      containerd_nvidia:
        path: /etc/containerd/conf.d/99-nvidia.toml
        state: present
`)
			if g.relocates {
				// On 1.6 the task may refuse for other reasons (a
				// drop-in replaces the whole CRI table); imports is
				// never one of them.
				r := nc(t, append([]string{"apply", "--check"}, labArgs(l, pb)...)...)
				if strings.Contains(r.stdout, "imports") {
					t.Fatalf("imports reported as a setting:\n%s", r)
				}
				return
			}
			check, apply := checkThenApply(t, l, pb)
			if strings.Contains(check.stdout+apply.stdout, "imports") {
				t.Fatalf("imports reported as a setting:\n%s\n%s", check, apply)
			}
			wantCode(t, check, 2)
			wantCode(t, apply, 0)
			wantRuntimes(t, l, node)
		})
	}
}

// criMainConfig is a main config with CRI settings of its own: a registry
// mirror and credentials, a base runtime spec, CNI directories. It is the
// containerd_dropins module tests' file, so both levels test one config.
func criMainConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "modules", "containerd_dropins", "testdata", "cri-main.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// explainNodeLost is `nodeconverge explain --json`'s list of values written in
// a loaded file that are not in effect.
func explainNodeLost(t *testing.T, l *labtest.Lab, node string) []map[string]any {
	t.Helper()
	r := nc(t, append([]string{"explain", "--json", "-l", node}, labArgs(l)...)...)
	wantCode(t, r, 0)
	var out []struct {
		Explanation struct {
			OK   bool
			Lost []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 1 || !out[0].Explanation.OK {
		t.Fatalf("explain --json: %v\n%s", err, r)
	}
	return out[0].Explanation.Lost
}

// Issue 10, defect 6: on 1.6 the GPU Operator's drop-in (a whole CRI table,
// protected) hides the main config's own CRI settings. After the run no
// value written in a loaded file is out of effect: they are consolidated
// into the protected drop-in, which is not moved; the rerun changes
// nothing.
func TestShadowedSettingsConsolidated(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "none", NoContainerd: true, ContainerdBin: labtest.Containerd(t, labtest.Containerd16)})
	node := l.Nodes[0].Name
	nvidia := scenarioFile(t, "99-nvidia.toml")
	nvidia = nvidia[:strings.Index(nvidia, `    [plugins."io.containerd.grpc.v1.cri".registry]`)]
	putFile(t, l, node, "/etc/containerd/config.toml", criMainConfig(t))
	putFile(t, l, node, "/etc/containerd/conf.d/99-nvidia.toml", nvidia)
	if len(explainNodeLost(t, l, node)) == 0 {
		t.Fatal("the case is not shadowed: explain lists nothing out of effect")
	}
	pb := dropinsPlaybook(t, node, "")
	check, apply := checkThenApply(t, l, pb)
	wantCode(t, check, 2)
	wantCode(t, apply, 0)
	if strings.Contains(check.stdout+apply.stdout, "s3cret-robot") {
		t.Fatalf("a credential was printed:\n%s\n%s", check, apply)
	}
	if lost := explainNodeLost(t, l, node); len(lost) != 0 {
		t.Fatalf("after the run, written but not in effect: %v", lost)
	}
	dump := wantRuntimes(t, l, node)
	for _, want := range []string{"mirror.lab:5000", "cri-base.json", "/opt/cni/bin-lab", "/etc/cni/net.d-lab"} {
		if !strings.Contains(dump, want) {
			t.Errorf("%s not in effect after the run", want)
		}
	}
	if _, err := os.Stat(l.NodePath(node, "/etc/containerd/conf.d/99-nvidia.toml")); err != nil {
		t.Fatalf("the protected drop-in was moved: %v", err)
	}
	before := l.HashTree(t, node)
	r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 0)
	if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
		t.Fatalf("the rerun changed files:\n%s\n%s", d, r)
	}
}

// Issue 10, defect 8: two identical shadowing drop-ins. Removing either one
// alone changes nothing; the shipped playbook moves both and converges.
func TestPairOfShadowingDropins(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "incident", ContainerdBin: labtest.Containerd(t, labtest.Containerd16)})
	node := l.Nodes[0].Name
	putFile(t, l, node, "/etc/containerd/conf.d/zz-labhub-registry.orig.toml", scenarioFile(t, "zz-labhub-registry.toml"))
	check, apply := checkThenApply(t, l, shippedPlaybook())
	wantCode(t, check, 2)
	wantCode(t, apply, 0)
	wantRuntimes(t, l, node)
	for _, f := range []string{"zz-labhub-registry.toml", "zz-labhub-registry.orig.toml"} {
		if _, err := os.Stat(l.NodePath(node, "/etc/containerd/conf.d.disabled/"+f)); err != nil {
			t.Errorf("%s not relocated: %v", f, err)
		}
	}
	after := l.HashTree(t, node)
	r := nc(t, append([]string{"apply"}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, r, 0)
	if d := cmp.Diff(after, l.HashTree(t, node)); d != "" {
		t.Fatalf("the rerun changed files:\n%s\n%s", d, r)
	}
}

// Issue 10, defect 9: a table pasted twice in 99-nvidia.toml makes the tree
// one containerd refuses. containerd_dropins does not fail on it (a later
// task may repair it): it reports it, moves nothing and the play goes on.
func TestUnparseableDropinNotDecidedNow(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "incident", NoContainerd: true, ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			paste := scenarioFile(t, "omen-nvidia-append.toml")
			putFile(t, l, node, "/etc/containerd/conf.d/99-nvidia.toml", scenarioFile(t, "99-nvidia.toml")+paste+paste)
			before := l.HashTree(t, node)
			pb := dropinsPlaybook(t, node, `
    - name: a later task runs
      command:
        cmd: "true"
`)
			for _, args := range [][]string{{"apply", "--check"}, {"apply"}} {
				r := nc(t, append(args, labArgs(l, pb)...)...)
				if r.code != 0 && r.code != 2 {
					t.Fatalf("%v: containerd_dropins failed on a file a later task may repair:\n%s", args, r)
				}
				if !strings.Contains(r.stdout, "not decidable now") || !strings.Contains(r.stdout, "99-nvidia.toml does not parse") {
					t.Fatalf("%v: the unparseable drop-in is not reported:\n%s", args, r)
				}
				if !strings.Contains(r.stdout, "TASK [a later task runs]") {
					t.Fatalf("%v: the play stopped:\n%s", args, r)
				}
				if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
					t.Fatalf("%v: files changed:\n%s", args, d)
				}
			}
		})
	}
}

// Issue 11, item 11: on 2.x `config dump` exits 0 for a tree with a
// directory or a dangling symlink in conf.d and prints it without them and
// every file after them; the daemon refuses the tree. Such a path is
// reported, never moved, and the dump is never taken as proof.
func TestUnloadableImportsNeverMoved(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "incident", NoContainerd: true, ContainerdBin: labtest.Containerd(t, labtest.Containerd2)})
	node := l.Nodes[0].Name
	if err := os.Mkdir(l.NodePath(node, "/etc/containerd/conf.d/50-dir.toml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/containerd/gone.toml", l.NodePath(node, "/etc/containerd/conf.d/40-gone.toml")); err != nil {
		t.Fatal(err)
	}
	// The node's own 2.x dump: exit 0, without 99-nvidia.toml's runtimes.
	dump, err := l.TryExec(node, "containerd", "config", "dump")
	if err != nil || strings.Contains(dump, "nvidia-container-runtime") {
		t.Fatalf("the premise changed: containerd 2.x config dump err=%v, nvidia runtimes present=%v", err, strings.Contains(dump, "nvidia-container-runtime"))
	}
	before := l.HashTree(t, node)
	pb := dropinsPlaybook(t, node, "")
	for _, args := range [][]string{{"apply", "--check"}, {"apply"}} {
		r := nc(t, append(args, labArgs(l, pb)...)...)
		wantCode(t, r, 0)
		for _, want := range []string{"40-gone.toml is a dangling symlink", "50-dir.toml is a directory"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("%v: %q not reported:\n%s", args, want, r)
			}
		}
		if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
			t.Fatalf("%v: files changed:\n%s", args, d)
		}
		if fi, err := os.Stat(l.NodePath(node, "/etc/containerd/conf.d/50-dir.toml")); err != nil || !fi.IsDir() {
			t.Fatalf("%v: the directory was moved: %v", args, err)
		}
	}
	r := nc(t, append([]string{"explain", "-l", node}, labArgs(l)...)...)
	if !strings.Contains(r.stdout, "CANNOT BE LOADED") || !strings.Contains(r.stdout, "the tree does not load") {
		t.Fatalf("explain presents the tree as loading:\n%s", r)
	}
}

// Issue 11, item 11: one drop-in that hides values of two plugins is moved
// once, and the run converges. (On 2.1.5 a 2.x-layout registry drop-in hid
// cri.v1.runtime and cri.v1.images; containerd 2.4, the lab's 2.x, merges
// it, so the two-plugin case is built on 1.6, where any replaced plugin
// table hides; on 2.x the 2.x-layout drop-in is asserted to stay.)
func TestOneDropinMovedOnce(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "incident", NoContainerd: true, ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			zz := `version = 3
[plugins."io.containerd.cri.v1.images".registry]
  config_path = "/etc/containerd/certs.d"
`
			if g.relocates {
				putFile(t, l, node, "/etc/containerd/config.toml", scenarioFile(t, "config.toml")+`
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.gc.v1.scheduler"]
    pause_threshold = 0.05
    deletion_threshold = 7
    startup_delay = "100ms"
`)
				zz = `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.gc.v1.scheduler"]
  startup_delay = "100ms"
`
			}
			putFile(t, l, node, "/etc/containerd/conf.d/zz-labhub-registry.toml", zz)
			before := l.HashTree(t, node)
			check, apply := checkThenApply(t, l, dropinsPlaybook(t, node, ""))
			if !g.relocates {
				wantCode(t, check, 0)
				wantCode(t, apply, 0)
				if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
					t.Fatalf("files changed:\n%s", d)
				}
				wantRuntimes(t, l, node)
				return
			}
			wantCode(t, check, 2)
			wantCode(t, apply, 0)
			if n := strings.Count(apply.stdout, "move /etc/containerd/conf.d.disabled/zz-labhub-registry.toml "); n != 1 {
				t.Fatalf("%d moves of zz-labhub-registry.toml, want 1:\n%s", n, apply)
			}
			dump := wantRuntimes(t, l, node)
			if !strings.Contains(dump, "deletion_threshold = 7") {
				t.Errorf("the scheduler settings are not back:\n%s", dump)
			}
		})
	}
}

// Issue 28 #3: the incident among 498 further drop-ins (each sets the
// tracing plugin's sampling ratio) on containerd 1.6. The tree is too large
// to measure one file at a time; the shipped playbook measures it by
// removing groups of files, moves zz-labhub-registry.toml only, converges,
// and its rerun changes nothing. The plan says how many dumps it took.
func TestFiveHundredDropinsShipped(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "incident", ContainerdBin: labtest.Containerd(t, labtest.Containerd16)})
	node := l.Nodes[0].Name
	for i := 1; i <= 498; i++ {
		putFile(t, l, node, fmt.Sprintf("/etc/containerd/conf.d/%03d-tracing.toml", i), fmt.Sprintf("[plugins.\"io.containerd.internal.v1.tracing\"]\n  sampling_ratio = 0.%03d\n", i))
	}
	check, apply := checkThenApply(t, l, shippedPlaybook())
	wantCode(t, check, 2)
	wantCode(t, apply, 0)
	wantRuntimes(t, l, node)
	if _, err := os.Stat(l.NodePath(node, "/etc/containerd/conf.d.disabled/zz-labhub-registry.toml")); err != nil {
		t.Errorf("zz-labhub-registry.toml not relocated: %v", err)
	}
	if ents, err := os.ReadDir(l.NodePath(node, "/etc/containerd/conf.d.disabled")); err != nil || len(ents) != 2 {
		t.Errorf("conf.d.disabled holds %d entries (%v), want the one file and its note", len(ents), err)
	}
	// Nothing to relocate now; -v shows how the tree was measured.
	v := nc(t, append([]string{"apply", "--check", "-v"}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, v, 0)
	m := regexp.MustCompile(`(\d+) loaded files: measured by removing groups of files, (\d+) containerd config dumps`).FindStringSubmatch(v.stdout)
	if m == nil || m[1] != "500" {
		t.Fatalf("the measurement is not reported:\n%s", v)
	}
	t.Logf("%s loaded files measured with %s containerd config dumps", m[1], m[2])
	after := l.HashTree(t, node)
	r := nc(t, append([]string{"apply"}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, r, 0)
	if d := cmp.Diff(after, l.HashTree(t, node)); d != "" {
		t.Fatalf("the rerun changed files:\n%s\n%s", d, r)
	}
}
