package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nodeconverge/lab/labtest"
)

// restartGenerations are the containerd generations the restart faults run
// on.
var restartGenerations = []struct {
	name string
	gen  labtest.Generation
}{{"1.6", labtest.Containerd16}, {"2.x", labtest.Containerd2}}

// TestFaultOwedRestartRollsBackOwingRun: a run writes a config that
// `config dump` accepts but on which the CRI plugin cannot load (a default
// runtime that does not exist), and is killed (SIGKILL) before its
// handler. The next run changes nothing; its owed restart fails the gates,
// and its rollback undoes the killed run's change from that run's backups:
// the config is back, containerd runs with the CRI plugin ok, and the
// output names the restored file and the run that owed the restart.
func TestFaultOwedRestartRollsBackOwingRun(t *testing.T) {
	for _, g := range restartGenerations {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			cfg := l.NodePath(node, "/etc/containerd/config.toml")
			orig, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			pb := writePlaybook(t, `
- name: bad change, then die
  hosts: all
  tasks:
    - name: a default runtime that does not exist
      copy:
        dest: /etc/containerd/config.toml
        content: |
          version = 2
          [plugins."io.containerd.grpc.v1.cri".containerd]
            default_runtime_name = "nvidia"
      notify: restart containerd
    - name: slow step (only on the first run)
      shell:
        cmd: "touch /etc/containerd/slow; sleep 60"
        creates: /etc/containerd/slow
  handlers:
    - name: restart containerd
      containerd_restart:
        runtimes: []
        timeout: 20s
`)
			a, aout := start(t, append([]string{"apply"}, labArgs(l, pb)...)...)
			waitFile(t, l.NodePath(node, "/etc/containerd/slow"), 60*time.Second)
			if err := a.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := a.Wait(); err == nil {
				t.Fatalf("killed run exited 0:\n%s", aout)
			}
			if got, err := os.ReadFile(cfg); err != nil || string(got) == string(orig) {
				t.Fatalf("the killed run did not leave its change (%v):\n%s", err, got)
			}
			recs, err := filepath.Glob(l.NodePath(node, "/var/lib/nodeconverge/pending/*.json"))
			if err != nil || len(recs) != 1 {
				t.Fatalf("want one pending record after the kill, got %v (%v)", recs, err)
			}

			r, _ := ncBounded(t, 5*time.Minute, append([]string{"apply"}, labArgs(l, pb)...)...)
			wantCode(t, r, 1)
			for _, want := range []string{"owed since run", "failed its health gates", "rolled back /etc/containerd/config.toml", "which owed this handler: restored /etc/containerd/config.toml"} {
				if !strings.Contains(r.stdout, want) {
					t.Fatalf("want %q in the output:\n%s", want, r)
				}
			}
			if got, err := os.ReadFile(cfg); err != nil || string(got) != string(orig) {
				t.Fatalf("config.toml not restored from the killed run's backup (%v):\n%s", err, got)
			}
			if st := strings.TrimSpace(l.Exec(t, node, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
				t.Fatalf("containerd is %s after the owed restart's rollback", st)
			}
			if plugins := l.Exec(t, node, "ctr", "plugins", "ls"); !criOK.MatchString(plugins) {
				t.Fatalf("CRI still failing after the rollback:\n%s", plugins)
			}
		})
	}
}
