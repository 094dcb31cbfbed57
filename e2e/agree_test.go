package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// plannedPaths reads a JSON report and returns, per host, every path a
// changed task plans to touch (both ends of a move).
func plannedPaths(t *testing.T, reportPath string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Schema  int `json:"schema_version"`
		Results []struct {
			Host   string `json:"host"`
			Status string `json:"status"`
			Plan   *struct {
				Files []struct {
					Action, Path, From string
				} `json:"files"`
			} `json:"plan"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report %s: %v", reportPath, err)
	}
	if rep.Schema != 1 {
		t.Fatalf("report schema_version %d", rep.Schema)
	}
	out := map[string][]string{}
	for _, r := range rep.Results {
		if r.Status != "changed" || r.Plan == nil {
			continue
		}
		for _, f := range r.Plan.Files {
			out[r.Host] = append(out[r.Host], f.Path)
			if f.From != "" {
				out[r.Host] = append(out[r.Host], f.From)
			}
		}
	}
	return normalise(out)
}

func normalise(m map[string][]string) map[string][]string {
	for h, ps := range m {
		sort.Strings(ps)
		m[h] = dedupe(ps)
		if len(m[h]) == 0 {
			delete(m, h)
		}
	}
	return m
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// touchedPaths lists, per host, the files whose hash differs between two
// HashTree snapshots (created, removed or changed).
func touchedPaths(before, after map[string]map[string]string) map[string][]string {
	out := map[string][]string{}
	for h, b := range before {
		a := after[h]
		for p, hb := range b {
			if a[p] != hb {
				out[h] = append(out[h], p)
			}
		}
		for p := range a {
			if _, ok := b[p]; !ok {
				out[h] = append(out[h], p)
			}
		}
	}
	return normalise(out)
}

// disagreement compares what check mode planned with what apply really did
// on disk, restricted to the paths the lab hashes (under /etc). It returns
// "" when they agree.
func disagreement(planned, touched map[string][]string) string {
	inScope := map[string][]string{}
	for h, ps := range planned {
		for _, p := range ps {
			if strings.HasPrefix(p, "/etc/") {
				inScope[h] = append(inScope[h], p)
			}
		}
	}
	return cmp.Diff(normalise(inScope), touched)
}

func snapshot(t *testing.T, l *labtest.Lab) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, n := range l.Nodes {
		out[n.Name] = l.HashTree(t, n.Name)
	}
	return out
}

// checkThenApply runs --check then apply with JSON reports and fails the
// test unless the set of files check mode planned to change equals, host by
// host and file by file, the set apply changed on disk. It returns both
// results for further assertions.
func checkThenApply(t *testing.T, l *labtest.Lab, playbook string, extra ...string) (check, apply result) {
	t.Helper()
	dir := t.TempDir()
	cj, aj := filepath.Join(dir, "check.json"), filepath.Join(dir, "apply.json")
	before := snapshot(t, l)
	check = nc(t, append(append([]string{"apply", "--check", "--diff", "--report", "json=" + cj}, labArgs(l, playbook)...), extra...)...)
	if d := cmp.Diff(before, snapshot(t, l)); d != "" {
		t.Fatalf("check mode changed files:\n%s\n%s", d, check)
	}
	apply = nc(t, append(append([]string{"apply", "--report", "json=" + aj}, labArgs(l, playbook)...), extra...)...)
	if d := disagreement(plannedPaths(t, cj), touchedPaths(before, snapshot(t, l))); d != "" {
		t.Fatalf("check mode and apply disagree (-planned +applied):\n%s\ncheck:\n%s\napply:\n%s", d, check, apply)
	}
	return check, apply
}

// TestAgreementCatchesMismatch plants an apply that did more than its plan
// (and one that did less) and expects the comparison to say so.
func TestAgreementCatchesMismatch(t *testing.T) {
	planned := map[string][]string{"n1": {"/etc/containerd/a.toml"}}
	more := map[string][]string{"n1": {"/etc/containerd/a.toml", "/etc/containerd/b.toml"}}
	less := map[string][]string{}
	if disagreement(planned, more) == "" {
		t.Fatal("an apply that changed an unplanned file was not caught")
	}
	if disagreement(planned, less) == "" {
		t.Fatal("an apply that skipped a planned file was not caught")
	}
	same := map[string][]string{"n1": {"/etc/containerd/a.toml"}}
	if d := disagreement(planned, same); d != "" {
		t.Fatalf("agreeing runs reported as disagreeing: %s", d)
	}
}
