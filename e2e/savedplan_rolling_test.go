package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// restartSpan is one containerd restart on a node as the lab's systemctl
// stand-in logs it: from the stop (or, for a daemon that was not running,
// the start) to the moment the new daemon answers.
type restartSpan struct {
	node          string
	from, answers time.Time
}

// standinLine is a line the systemctl stand-in logs about containerd.
var standinLine = regexp.MustCompile(`(?m)^(\S+) lab systemctl: (stopping containerd|starting |containerd \(pid \d+\) answers)`)

// restartsSince reads the restarts each node's containerd log records past
// offset (its size before the run).
func restartsSince(t *testing.T, l *labtest.Lab, offsets map[string]int64) []restartSpan {
	t.Helper()
	var spans []restartSpan
	for _, n := range l.Nodes {
		b, err := os.ReadFile(l.Node(t, n.Name).Root + "/containerd.log")
		if err != nil {
			t.Fatal(err)
		}
		var cur *restartSpan
		for _, m := range standinLine.FindAllStringSubmatch(string(b[offsets[n.Name]:]), -1) {
			at, err := time.Parse("2006-01-02T15:04:05.999999999Z07:00", m[1])
			if err != nil {
				t.Fatalf("%s: stand-in time %q: %v", n.Name, m[1], err)
			}
			switch {
			case strings.HasPrefix(m[2], "containerd (pid"):
				if cur == nil {
					t.Fatalf("%s: the daemon answers with no stop or start before it:\n%s", n.Name, b[offsets[n.Name]:])
				}
				cur.answers = at
				spans = append(spans, *cur)
				cur = nil
			case cur == nil:
				cur = &restartSpan{node: n.Name, from: at}
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
	return spans
}

// logSizes is each node's containerd log size now.
func logSizes(t *testing.T, l *labtest.Lab) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, n := range l.Nodes {
		st, err := os.Stat(l.Node(t, n.Name).Root + "/containerd.log")
		if err != nil {
			t.Fatal(err)
		}
		out[n.Name] = st.Size()
	}
	return out
}

// TestSavedPlanRollsOneNodeAtATime (issue 27): the shipped playbook
// (serial 1, max_fail_percentage 0) saved by check mode and applied later
// restarts containerd one node at a time, as a live apply does: by the
// times the lab's systemctl stand-in records, each node's restart starts
// after the previous node's daemon answers, never overlapping. Then, with a
// fresh plan, the first node's gate fails (its toolkit broke after
// planning): that node is rolled back and restarted on its old files, and
// the other three are not touched, their recap saying not attempted.
func TestSavedPlanRollsOneNodeAtATime(t *testing.T) {
	for _, g := range []struct {
		name string
		gen  labtest.Generation
	}{{"containerd-1.6", labtest.Containerd16}, {"containerd-2.x", labtest.Containerd2}} {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident", ContainerdBin: labtest.Containerd(t, g.gen)})
			planFile := filepath.Join(t.TempDir(), "plan.json")
			r := nc(t, append([]string{"apply", "--check", "--out", planFile}, labArgs(l, shippedPlaybook())...)...)
			wantCode(t, r, 2)
			offsets := logSizes(t, l)
			r = nc(t, append([]string{"apply"}, labArgs(l, planFile)...)...)
			wantCode(t, r, 0)
			spans := restartsSince(t, l, offsets)
			if len(spans) != len(l.Nodes) {
				t.Fatalf("want one restart per node (%d), the lab recorded %+v\n%s", len(l.Nodes), spans, r)
			}
			for i := 1; i < len(spans); i++ {
				prev, next := spans[i-1], spans[i]
				if !next.from.After(prev.answers) {
					t.Errorf("%s's restart began at %s, before %s's daemon answered (%s): restarts overlap\n%s",
						next.node, next.from.Format(time.RFC3339Nano), prev.node, prev.answers.Format(time.RFC3339Nano), r)
				}
			}

			// The second half rolls a new change out on the converged
			// nodes, from a plan saved before the first node's toolkit
			// broke.
			first := l.Nodes[0].Name
			pb := writePlaybook(t, `
- name: rolling change
  hosts: gpu
  serial: 1
  max_fail_percentage: 0
  tasks:
    - name: a note in a drop-in
      copy:
        dest: /etc/containerd/conf.d/50-note.toml
        content: "# rolled out one node at a time\n"
      notify: restart containerd
  handlers:
    - name: restart containerd
      containerd_restart:
        runtimes: [nvidia, nvidia-cdi, nvidia-legacy]
`)
			r = nc(t, append([]string{"apply", "--check", "--out", planFile}, labArgs(l, pb)...)...)
			wantCode(t, r, 2)
			before := map[string]map[string]string{}
			for _, n := range l.Nodes {
				before[n.Name] = l.HashTree(t, n.Name)
			}
			pids := map[string]string{}
			for _, n := range l.Nodes[1:] {
				pids[n.Name] = daemonPID(t, l, n.Name)
			}
			brokenToolkit(t, l, first)
			r = nc(t, append([]string{"apply"}, labArgs(l, planFile)...)...)
			wantCode(t, r, 1)
			for _, want := range []string{"failed: [" + first + "]", "failed its health gates", "driver not loaded", "rolled back /etc/containerd/conf.d/50-note.toml"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the first node's failure lacks %q:\n%s", want, r)
				}
			}
			if d := cmp.Diff(before[first], l.HashTree(t, first)); d != "" {
				t.Errorf("%s not rolled back to its files:\n%s", first, d)
			}
			for _, n := range l.Nodes[1:] {
				if strings.Contains(r.stdout, "["+n.Name+"]") {
					t.Errorf("%s was touched after the first node's gate failed:\n%s", n.Name, r)
				}
				if d := cmp.Diff(before[n.Name], l.HashTree(t, n.Name)); d != "" {
					t.Errorf("%s's files changed:\n%s", n.Name, d)
				}
				if p := daemonPID(t, l, n.Name); p != pids[n.Name] {
					t.Errorf("%s's containerd restarted (%s -> %s)", n.Name, pids[n.Name], p)
				}
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(n.Name) + ` +:.*not attempted: play "rolling change" stopped in batch 1`).MatchString(r.stdout) {
					t.Errorf("%s's recap does not say it was not attempted:\n%s", n.Name, r)
				}
			}
		})
	}
}
