package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// TestFaultSavedPlanReadFileEdited: the shipped playbook's saved plan on
// the incident lab; on one node the main config, which that node's plan
// reads (its proof is a config dump of the whole tree) but does not write,
// is edited after planning. Applying the plan refuses that node, naming
// the file, and writes nothing there; a drop-in added to conf.d after
// planning refuses another node the same way; the other nodes are applied.
// (The play rolls one node at a time and stops at a refused node, so each
// is applied on its own, with -l.)
func TestFaultSavedPlanReadFileEdited(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident", NoContainerd: true})
	planFile := filepath.Join(t.TempDir(), "plan.json")
	r := nc(t, append([]string{"apply", "--check", "--out", planFile}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, r, 2)
	edited, added := "nuc2", "omen2"
	if strings.Contains(r.stdout, "changed: ["+edited+"] update /etc/containerd/config.toml") {
		t.Fatalf("%s's plan writes config.toml; the test needs a file it only reads:\n%s", edited, r)
	}
	cfg := l.NodePath(edited, "/etc/containerd/config.toml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("# edited by hand after the plan\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.NodePath(added, "/etc/containerd/conf.d/60-added.toml"), []byte("# added after the plan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]string{edited: l.HashTree(t, edited), added: l.HashTree(t, added)}

	r = nc(t, append([]string{"apply", "-l", edited}, labArgs(l, planFile)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "failed: ["+edited+"]") || !strings.Contains(r.stdout, "/etc/containerd/config.toml changed since the plan was made") {
		t.Fatalf("the node whose read-only config was edited must be refused with the reason:\n%s", r)
	}
	r = nc(t, append([]string{"apply", "-l", added}, labArgs(l, planFile)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "failed: ["+added+"]") || !strings.Contains(r.stdout, "/etc/containerd/conf.d/*.toml changed since the plan was made") {
		t.Fatalf("the node with a drop-in added must be refused with the reason:\n%s", r)
	}
	for n, b := range before {
		if d := cmp.Diff(b, l.HashTree(t, n)); d != "" {
			t.Errorf("refused node %s was changed:\n%s", n, d)
		}
	}
	r = nc(t, append([]string{"apply", "-l", "nuc1,omen"}, labArgs(l, planFile)...)...)
	wantCode(t, r, 0)
	for _, n := range []string{"nuc1", "omen"} {
		if strings.Contains(r.stdout, "failed: ["+n+"]") {
			t.Errorf("%s was refused though nothing of it changed:\n%s", n, r)
		}
	}
}
