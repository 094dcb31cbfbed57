package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// TestSavedPlan: a plan saved by check mode is applied later exactly; a node
// whose drop-in someone edited in between is refused (nothing written on
// it) and the others are applied and converge.
func TestSavedPlan(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident"})
	planFile := filepath.Join(t.TempDir(), "plan.json")
	r := nc(t, append([]string{"apply", "--check", "--out", planFile}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, r, 2)
	st, err := os.Stat(planFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("saved plan mode %v, want 0600 (it holds file contents)", st.Mode())
	}

	edited := "nuc2"
	zz := l.NodePath(edited, "/etc/containerd/conf.d/zz-labhub-registry.toml")
	f, err := os.OpenFile(zz, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("# edited by hand after the plan\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	before := l.HashTree(t, edited)

	r = nc(t, append([]string{"apply"}, labArgs(l, planFile)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "failed: ["+edited+"]") || !strings.Contains(r.stdout, "zz-labhub-registry.toml changed since the plan was made") {
		t.Fatalf("the edited node must be refused with the reason:\n%s", r)
	}
	if d := cmp.Diff(before, l.HashTree(t, edited)); d != "" {
		t.Fatalf("refused node was changed:\n%s", d)
	}
	for _, n := range []string{"nuc1", "omen", "omen2"} {
		if _, err := os.Stat(l.NodePath(n, "/etc/containerd/conf.d.disabled/zz-labhub-registry.toml")); err != nil {
			t.Errorf("%s: plan not applied: %v", n, err)
		}
		if st := strings.TrimSpace(l.Exec(t, n, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
			t.Errorf("%s: containerd %s after the saved plan's handler", n, st)
		}
	}
	// The applied nodes are converged: a fresh check finds nothing there.
	r = nc(t, append([]string{"apply", "--check", "-l", "all:!" + edited}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, r, 0)
}
