package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

// wrapContainerdCounting replaces the lab's containerd on each node's PATH
// with a counting wrapper, a test stand-in: a shell script that logs every
// run of `containerd` the node is asked for (the modules call it by name,
// the lab's systemctl starts the daemon by its full path, so the daemon is
// not counted) and execs the real binary. runs reads and clears the log.
func wrapContainerdCounting(t *testing.T, l *labtest.Lab, real string) (runs func(node string) []string) {
	t.Helper()
	for _, n := range l.Nodes {
		w := l.NodePath(n.Name, "/usr/local/sbin/containerd")
		// The lab's is a symlink to the real binary: writing through it
		// would overwrite the binary.
		_ = os.Remove(w)
		script := fmt.Sprintf("#!/bin/sh\n# Stand-in from e2e/runs_test.go: logs this run of containerd, then execs the real one.\nprintf '%%s %%s %%s\\n' \"$*\" \"${PWD##*/}\" \"$(cat nc-*.toml 2>/dev/null | md5sum | cut -c1-8)\" >>/root/containerd-runs.log\nexec %s \"$@\"\n", shellWord(real))
		if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return func(node string) []string {
		p := l.NodePath(node, "/root/containerd-runs.log")
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		_ = os.Remove(p)
		var dumps []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			// `containerd --version` (the tree's gathering) loads no
			// config; the runs that cost are the dumps.
			if strings.Contains(line, "config dump") {
				dumps = append(dumps, line)
			}
		}
		return dumps
	}
}

// TestConvergeContainerdRuns counts, on the node, how many times one
// converge of the shipped playbook runs `containerd config dump` on a plain
// incident node (nuc1) and on an omen-like one (omen, nvidia block pasted
// twice), and how many times the no-change drift run does afterwards. The
// bench's target is at most 4 per node per converge; the floor needs 3
// (the live dump, the candidate's, the staged file's).
func TestConvergeContainerdRuns(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Names: []string{"nuc1", "omen"}, Scenario: "incident"})
	runs := wrapContainerdCounting(t, l, labtest.Containerd(t, labtest.Containerd16))
	pb := shippedPlaybook()

	r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 0)
	converge := map[string][]string{}
	for _, n := range l.Nodes {
		converge[n.Name] = runs(n.Name)
	}
	r = nc(t, append([]string{"apply", "--check"}, labArgs(l, pb)...)...)
	wantCode(t, r, 0)
	drift := map[string][]string{}
	for _, n := range l.Nodes {
		drift[n.Name] = runs(n.Name)
	}
	// Before proofs were shared by content: nuc1 16 and omen 20 per
	// converge, 6 per drift run. Now the plan's dumps are the re-check's
	// and the gate's, and only the variants a decision needs are staged:
	// nuc1 the live tree, the defaults and the two load-order prefixes
	// (the candidate is the prefix without zz); omen also its live tree
	// that does not load, before the repair.
	limits := map[string][2]int{"nuc1": {4, 1}, "omen": {5, 1}}
	for _, n := range l.Nodes {
		t.Logf("%s: converge ran containerd config dump %d times, drift %d", n.Name, len(converge[n.Name]), len(drift[n.Name]))
		for _, c := range converge[n.Name] {
			t.Logf("  converge: containerd %s", c)
		}
		if len(converge[n.Name]) == 0 {
			// The live tree is dumped at least once: none counted means
			// the wrapper was not the containerd the node ran, and the
			// limits below would pass without measuring anything.
			t.Errorf("%s: the counting wrapper logged no containerd config dump", n.Name)
			continue
		}
		if lim := limits[n.Name]; len(converge[n.Name]) > lim[0] || len(drift[n.Name]) > lim[1] {
			t.Errorf("%s: converge ran containerd %d times (at most %d), drift %d (at most %d)", n.Name, len(converge[n.Name]), lim[0], len(drift[n.Name]), lim[1])
		}
	}
}
