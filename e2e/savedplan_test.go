package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// TestSavedPlan: a plan saved by check mode is applied later exactly, by
// the play's batches (serial 1, max_fail_percentage 0): a node whose
// drop-in someone edited in between is refused (nothing written on it),
// which stops the rolling play there as a failed node does: the nodes
// before it are applied and converge, those after it are not attempted
// and untouched, and a later apply of the same plan limited to them
// converges them.
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

	later := []string{"omen", "omen2"}
	laterBefore := map[string]map[string]string{}
	for _, n := range later {
		laterBefore[n] = l.HashTree(t, n)
	}

	r = nc(t, append([]string{"apply"}, labArgs(l, planFile)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "failed: ["+edited+"]") || !strings.Contains(r.stdout, "zz-labhub-registry.toml changed since the plan was made") {
		t.Fatalf("the edited node must be refused with the reason:\n%s", r)
	}
	if d := cmp.Diff(before, l.HashTree(t, edited)); d != "" {
		t.Fatalf("refused node was changed:\n%s", d)
	}
	applied := func(n string) {
		t.Helper()
		if _, err := os.Stat(l.NodePath(n, "/etc/containerd/conf.d.disabled/zz-labhub-registry.toml")); err != nil {
			t.Errorf("%s: plan not applied: %v", n, err)
		}
		if st := strings.TrimSpace(l.Exec(t, n, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
			t.Errorf("%s: containerd %s after the saved plan's handler", n, st)
		}
	}
	applied("nuc1")
	for _, n := range later {
		if !strings.Contains(r.stdout, n) || !regexp.MustCompile(`(?m)^`+n+` +:.*not attempted: play "GPU containerd runtimes" stopped in batch 2`).MatchString(r.stdout) {
			t.Errorf("%s: the recap does not say it was not attempted:\n%s", n, r)
		}
		if d := cmp.Diff(laterBefore[n], l.HashTree(t, n)); d != "" {
			t.Errorf("%s was changed after the play stopped:\n%s", n, d)
		}
	}

	// The same plan still holds for the nodes the stopped play left alone.
	r = nc(t, append([]string{"apply", "-l", strings.Join(later, ",")}, labArgs(l, planFile)...)...)
	wantCode(t, r, 0)
	for _, n := range later {
		applied(n)
	}
	// The applied nodes are converged: a fresh check finds nothing there.
	r = nc(t, append([]string{"apply", "--check", "-l", "all:!" + edited}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, r, 0)
}
