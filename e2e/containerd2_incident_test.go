package e2e

import (
	"os"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

// TestIncidentOnContainerd2Defaults is the seed's failure on the newest
// line (issue 28 #2): containerd 2.x's own `config default` (version 3) and
// the containerd docs' full 2.x config as the main file, plus the
// incident's version 2 drop-ins (99-nvidia.toml with the runtimes, the
// pinned sandbox image and config_path; zz-labhub-registry.toml). The shipped
// playbook must converge each in one run, idempotently, as the corpus
// matrix judges a cell (runtimes, declared settings — the sandbox image and
// config_path 2.x migrates out of the v2 drop-in among them — nothing else
// changed, the rerun changes nothing, check = apply).
func TestIncidentOnContainerd2Defaults(t *testing.T) {
	want := map[string]bool{"containerd-2.x-default": true, "containerd-docs-full-2.x": true}
	var cells []*cell
	for _, c := range loadCorpus(t) {
		if !want[c.name] {
			continue
		}
		for _, s := range dropinSets() {
			if s.name == "incident" {
				cells = append(cells, &cell{cfg: c, set: s, gen: "2.x", node: "v" + string(rune('a'+len(cells)))})
			}
		}
	}
	if len(cells) != len(want) {
		t.Fatalf("corpus has %d of the %d configs", len(cells), len(want))
	}
	l := runGeneration(t, labtest.Containerd2, cells)
	for _, c := range cells {
		if c.outcome != "converged" {
			t.Errorf("%s: %s: %s", c.id(), c.outcome, c.detail)
			continue
		}
		b, err := os.ReadFile(l.NodePath(c.node, "/etc/containerd/conf.d/99-nvidia.toml"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: 99-nvidia.toml after the run:\n%s", c.id(), b)
		for _, k := range []string{"nvidia-container-runtime.cdi", "config_path"} {
			if !strings.Contains(string(b), k) {
				t.Errorf("%s: 99-nvidia.toml lost %s", c.id(), k)
			}
		}
	}
}
