package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

var generations = []struct {
	name string
	gen  labtest.Generation
	// relocates: containerd 1.x replaces a plugin's table per file, so
	// zz-labhub-registry.toml shadows and is moved; 2.x deep-merges and
	// it stays.
	relocates bool
}{
	{"containerd-1.6", labtest.Containerd16, true},
	{"containerd-2.x", labtest.Containerd2, false},
}

func shippedPlaybook() string {
	return filepath.Join(labtest.RepoRoot(), "playbooks", "gpu-containerd.yaml")
}

// TestIncidentConverges runs the shipped playbook on the incident lab, on
// both containerd generations: check mode plans and touches nothing, apply
// converges (omen's duplicated tables repaired and its containerd started),
// the runtimes and config_path are effective, and a second apply changes
// nothing.
func TestIncidentConverges(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident", ContainerdBin: labtest.Containerd(t, g.gen)})
			pb := shippedPlaybook()
			// Check mode, then apply: the files check mode plans to change
			// must be exactly the files apply changes.
			r, applied := checkThenApply(t, l, pb)
			wantCode(t, r, 2)
			wantCode(t, applied, 0)
			if !strings.Contains(r.stdout, "changed: [omen] update /etc/containerd/config.toml") {
				t.Fatalf("check mode should plan omen's repair:\n%s", r)
			}
			if !strings.Contains(r.stdout, "effective config (") {
				t.Fatalf("--diff should show the effective diff:\n%s", r)
			}
			moves := strings.Count(r.stdout, "move /etc/containerd/conf.d.disabled/zz-labhub-registry.toml")
			if g.relocates && moves != 4 || !g.relocates && moves != 0 {
				t.Fatalf("check mode planned %d relocations of zz-labhub-registry.toml:\n%s", moves, r)
			}

			for _, n := range l.Nodes {
				dump := l.Exec(t, n.Name, "containerd", "config", "dump")
				for _, bin := range []string{"nvidia-container-runtime", "nvidia-container-runtime.cdi", "nvidia-container-runtime.legacy"} {
					// 1.6 prints "double", 2.x 'single' quotes.
					if !regexp.MustCompile(`BinaryName = ["']/usr/local/nvidia/toolkit/` + regexp.QuoteMeta(bin) + `["']`).MatchString(dump) {
						t.Errorf("%s: %s is not effective", n.Name, bin)
					}
				}
				if !regexp.MustCompile(`config_path = ["']/etc/containerd/certs\.d["']`).MatchString(dump) {
					t.Errorf("%s: registry config_path lost", n.Name)
				}
				_, errMoved := os.Stat(l.NodePath(n.Name, "/etc/containerd/conf.d.disabled/zz-labhub-registry.toml"))
				_, errStayed := os.Stat(l.NodePath(n.Name, "/etc/containerd/conf.d/zz-labhub-registry.toml"))
				if g.relocates && (errMoved != nil || errStayed == nil) || !g.relocates && (errMoved == nil || errStayed != nil) {
					t.Errorf("%s: zz-labhub-registry.toml in the wrong place (moved err %v, stayed err %v)", n.Name, errMoved, errStayed)
				}
				if st := strings.TrimSpace(l.Exec(t, n.Name, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
					t.Errorf("%s: containerd is %s after the run", n.Name, st)
				}
			}
			cfg, err := os.ReadFile(l.NodePath("omen", "/etc/containerd/config.toml"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(cfg), "runtimes.nvidia") {
				t.Errorf("omen's main config still has nvidia tables:\n%s", cfg)
			}

			after := map[string]map[string]string{}
			for _, n := range l.Nodes {
				after[n.Name] = l.HashTree(t, n.Name)
			}
			r = nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
			wantCode(t, r, 0)
			if strings.Contains(r.stdout, "changed: [") || strings.Count(r.stdout, "changed=0") != 4 {
				t.Fatalf("second apply changed something:\n%s", r)
			}
			r = nc(t, append([]string{"apply", "--check"}, labArgs(l, pb)...)...)
			wantCode(t, r, 0)
			for _, n := range l.Nodes {
				if d := cmp.Diff(after[n.Name], l.HashTree(t, n.Name)); d != "" {
					t.Fatalf("second run changed %s's files:\n%s", n.Name, d)
				}
			}
		})
	}
}

// TestDropinRefusedWhenSettingsLost: with absorb: false, a shadowing
// drop-in that carries a setting no other file has is not moved; the lost
// key is named and every file stays byte-identical. By default the setting
// is consolidated into the file that owns the plugin.
func TestDropinRefusedWhenSettingsLost(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "incident", NoContainerd: true})
	node := l.Nodes[0].Name
	zz := l.NodePath(node, "/etc/containerd/conf.d/zz-labhub-registry.toml")
	if err := os.WriteFile(zz, []byte("[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs-harbor.d\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := l.HashTree(t, node)
	pb := writePlaybook(t, `
- name: relocate
  hosts: `+node+`
  tasks:
    - name: relocate shadowing drop-ins
      containerd_dropins:
        protect: [99-nvidia.toml]
        absorb: false
`)
	for _, check := range []bool{true, false} {
		args := []string{"apply"}
		if check {
			args = append(args, "--check")
		}
		r := nc(t, append(args, labArgs(l, pb)...)...)
		wantCode(t, r, 1)
		if !strings.Contains(r.stdout, "refusing to relocate") || !regexp.MustCompile(`\[plugins\."io\.containerd\.grpc\.v1\.cri"\.registry\]\n\s+config_path = "/etc/containerd/certs-harbor\.d"`).MatchString(r.stdout) {
			t.Fatalf("check=%v: want a refusal naming the lost config_path:\n%s", check, r)
		}
		if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
			t.Fatalf("check=%v: refused relocation changed files:\n%s", check, d)
		}
	}

	// Consolidation (the default): the lost setting moves into the file that owns the plugin,
	// and the drop-in is relocated; the effective config_path is kept and
	// the nvidia runtimes come back.
	absorb := writePlaybook(t, `
- name: relocate
  hosts: `+node+`
  tasks:
    - name: relocate shadowing drop-ins, absorbing their settings
      containerd_dropins:
        protect: [99-nvidia.toml]
        absorb: true
`)
	check, r := checkThenApply(t, l, absorb)
	wantCode(t, check, 2)
	wantCode(t, r, 0)
	dump := l.Exec(t, node, "containerd", "config", "dump")
	if !strings.Contains(dump, `config_path = "/etc/containerd/certs-harbor.d"`) || !strings.Contains(dump, "nvidia-container-runtime.cdi") {
		t.Fatalf("after absorb the effective config should keep certs-harbor.d and have the runtimes:\n%s\n%s", r, dump)
	}
	if _, err := os.Stat(l.NodePath(node, "/etc/containerd/conf.d.disabled/zz-labhub-registry.toml")); err != nil {
		t.Fatalf("drop-in not relocated: %v", err)
	}
	r = nc(t, append([]string{"apply"}, labArgs(l, absorb)...)...)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "changed: [") {
		t.Fatalf("absorb is not idempotent:\n%s", r)
	}
}

// TestExplainIncident: explain names zz-labhub-registry.toml as the owner
// of the CRI plugin and lists what it costs.
func TestExplainIncident(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "incident", NoContainerd: true})
	node := l.Nodes[0].Name
	r := nc(t, append([]string{"explain", "-l", node}, labArgs(l)...)...)
	wantCode(t, r, 0)
	owner := regexp.MustCompile(`io\.containerd\.grpc\.v1\.cri\s+/etc/containerd/conf\.d/zz-labhub-registry\.toml`)
	if !owner.MatchString(r.stdout) {
		t.Fatalf("explain should name zz-labhub-registry.toml as the CRI plugin's owner:\n%s", r)
	}
	// Values out of effect are shown as TOML: a table header, its keys.
	for _, lost := range []string{"runtimes.nvidia.options]\n        BinaryName", "runtimes.nvidia-cdi", "SystemdCgroup", "sandbox_image"} {
		if !regexp.MustCompile(regexp.QuoteMeta(lost) + `[^\n]*NOT in effect|written but NOT in effect[\s\S]*` + regexp.QuoteMeta(lost)).MatchString(r.stdout) {
			t.Errorf("explain should list %s as lost:\n%s", lost, r.stdout)
		}
	}
	r = nc(t, append([]string{"explain", "--json", "-l", node}, labArgs(l)...)...)
	wantCode(t, r, 0)
	var out []struct {
		Host        string
		Explanation struct {
			Owners map[string]string
			Lost   []struct{ Key, File, Winner string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("explain --json: %v\n%s", err, r.stdout)
	}
	if len(out) != 1 || out[0].Explanation.Owners["io.containerd.grpc.v1.cri"] != "/etc/containerd/conf.d/zz-labhub-registry.toml" {
		t.Fatalf("explain --json owners: %+v", out)
	}
}

// TestDropinsReportMode: mode report names the shadowing drop-in and what
// it hides, and moves nothing.
func TestDropinsReportMode(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "incident", NoContainerd: true})
	node := l.Nodes[0].Name
	before := l.HashTree(t, node)
	pb := writePlaybook(t, `
- name: report
  hosts: `+node+`
  tasks:
    - name: report shadowing drop-ins
      containerd_dropins:
        mode: report
`)
	r := nc(t, append([]string{"apply", "-v"}, labArgs(l, pb)...)...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "skipped: ["+node+"]") || !strings.Contains(r.stdout, "zz-labhub-registry.toml shadows") || !strings.Contains(r.stdout, "BinaryName") {
		t.Fatalf("report mode should name the drop-in and what it hides:\n%s", r)
	}
	if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
		t.Fatalf("report mode changed files:\n%s", d)
	}
}
