package containerddropins

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/lab/labtest"
)

// TestFiveHundredDropins (issue 28 #3): the incident's drop-ins among 498
// others (each sets the tracing plugin's sampling ratio, so each overrides
// the one before: their own choice, not hiding) on containerd 1.6, where
// zz-labhub-registry.toml hides the CRI values of the main config and of
// 99-nvidia.toml. The tree is measured by removing groups of files: the
// plan moves zz-labhub-registry.toml and nothing else, in far fewer dumps
// than one file at a time would take (the figure is logged), no stage holds
// more than stageChunk variants, and after applying, nothing is planned.
func TestFiveHundredDropins(t *testing.T) {
	files := map[string]string{
		"etc/containerd/config.toml":                    scenario(t, "config.toml"),
		"etc/containerd/conf.d/99-nvidia.toml":          scenario(t, "99-nvidia.toml"),
		"etc/containerd/conf.d/zz-labhub-registry.toml": scenario(t, "zz-labhub-registry.toml"),
	}
	for i := 1; i <= 498; i++ {
		files[fmt.Sprintf("etc/containerd/conf.d/%03d-tracing.toml", i)] = fmt.Sprintf("[plugins.\"io.containerd.internal.v1.tracing\"]\n  sampling_ratio = 0.%03d\n", i)
	}
	root, mainPath := tree(t, files)
	plan, err := check(t, labtest.Containerd16, root, mainPath, nil)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	var moves []string
	for _, f := range plan.Files {
		if f.Action == module.Move {
			moves = append(moves, f.From)
		}
	}
	zz := filepath.Join(root, "etc/containerd/conf.d/zz-labhub-registry.toml")
	if len(moves) != 1 || moves[0] != zz {
		t.Fatalf("moves %v, want only %s; notes %v", moves, zz, plan.Notes)
	}
	dumps := -1
	re := regexp.MustCompile(`(\d+) loaded files: measured by removing groups of files, (\d+) containerd config dumps`)
	for _, n := range plan.Notes {
		if m := re.FindStringSubmatch(n); m != nil {
			dumps, _ = strconv.Atoi(m[2])
			t.Logf("%s", n)
		}
	}
	if dumps < 1 || dumps > 100 {
		t.Fatalf("dumps = %d, want a measured count well under the 1002 of one file at a time; notes %v", dumps, plan.Notes)
	}
	h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
	if _, err := (Module{}).Apply(context.Background(), h, plan); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(zz); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", zz, err)
	}
	again, err := check(t, labtest.Containerd16, root, mainPath, nil)
	if err != nil || again.Changed() {
		t.Fatalf("second check: %v %+v", err, again)
	}
}

// TestGroupSearch drives the group search with an oracle: among 500
// candidate files, one file hides the first value and a pair (two
// identical drop-ins, each enough alone to hide it) hides the second. The
// search names exactly those files, and the removals it dumps grow with
// the logarithm of 500, not with 500.
func TestGroupSearch(t *testing.T) {
	var cands []string
	for i := 0; i < 500; i++ {
		cands = append(cands, fmt.Sprintf("f%03d", i))
	}
	hiders := map[int][]string{0: {"f237"}, 1: {"f010", "f400"}}
	back := func(set []string, key int) bool {
		for _, h := range hiders[key] {
			if !slices.Contains(set, h) {
				return false
			}
		}
		return true
	}
	seen := map[string]bool{}
	dump := func(sets [][]string) error {
		for _, s := range sets {
			seen[setKey(s)] = true
		}
		return nil
	}
	found, err := groupSearch([]search{{key: 0, cands: cands}, {key: 1, cands: cands}}, dump, back)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range hiders {
		got := slices.Clone(found[k])
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("value %d: found %v, want %v", k, got, want)
		}
	}
	// log2(500) is 9: one half-pair per level for the single hider, two
	// branches for the pair.
	if len(seen) > 60 {
		t.Errorf("%d removals dumped for 500 candidates", len(seen))
	}
	t.Logf("500 candidates, a single hider and a pair: %d removals dumped", len(seen))
}
