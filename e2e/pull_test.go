package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// pullInventory is the inventory a node uses to converge itself: one host,
// reached locally. The group is the shipped playbook's.
const pullInventory = `all:
  children:
    gpu:
      hosts:
        nuc1:
          ansible_connection: local
`

// TestPullMode converges an incident node (nuc1) with the shipped playbook
// three ways, each on a fresh lab: over SSH from the controller; locally
// inside the node's mount namespace (`ansible_connection: local`, what the
// contrib systemd timer runs); and from another mount namespace that has
// the node's root mounted at a path (--host-root, what the contrib
// DaemonSet runs). The three reports must be the same task for task
// (status, planned files, restart), the CRI plugin must be up afterwards,
// and a second run each way changes nothing.
func TestPullMode(t *testing.T) {
	pb := shippedPlaybook()
	var want []string
	for _, mode := range []string{"ssh", "local", "host-root"} {
		t.Run(mode, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Names: []string{"nuc1"}, Scenario: "incident"})
			dir := t.TempDir()
			inv := filepath.Join(dir, "inventory.yaml")
			if err := os.WriteFile(inv, []byte(pullInventory), 0o644); err != nil {
				t.Fatal(err)
			}
			run := func(name string) (result, string) {
				rep := filepath.Join(dir, name+".json")
				args := []string{"apply", "--report", "json=" + rep}
				var r result
				switch mode {
				case "ssh":
					r = nc(t, append(args, labArgs(l, pb)...)...)
				case "local":
					r = inNode(t, l, "nuc1", append(args, "-i", inv, pb)...)
				case "host-root":
					r = withHostRoot(t, l, "nuc1", append(args, "-i", inv, pb)...)
				}
				return r, rep
			}
			if mode == "host-root" {
				// The daemon a host-root run restarts lives in that run's
				// mount namespace, which lab.sh down does not know: stop it
				// through the node's systemctl before the lab goes (cleanups
				// run last-registered first).
				t.Cleanup(func() {
					if out, err := l.TryExec("nuc1", "systemctl", "stop", "containerd"); err != nil {
						t.Errorf("stop containerd: %v %s", err, out)
					}
				})
			}
			r, rep := run("apply")
			wantCode(t, r, 0)
			got := reportShape(t, rep)
			if want == nil {
				want = got
			} else if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%s report differs from the SSH run's (-ssh +%s):\n%s\n%s", mode, mode, d, r)
			}
			changed := 0
			for _, line := range got {
				if f := strings.Split(line, " | "); len(f) > 4 && f[4] == "changed" {
					changed++
				}
			}
			if changed == 0 {
				t.Fatalf("no task changed the incident node: %v", got)
			}
			if st := strings.TrimSpace(l.Exec(t, "nuc1", "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
				t.Fatalf("containerd is %s after the %s run", st, mode)
			}
			plugins := l.Exec(t, "nuc1", "ctr", "plugins", "ls")
			if !criOK.MatchString(plugins) {
				t.Fatalf("CRI plugin not ok after the %s run:\n%s", mode, plugins)
			}
			before := l.HashTree(t, "nuc1")
			r, _ = run("again")
			wantCode(t, r, 0)
			if strings.Contains(r.stdout, "changed: [") {
				t.Fatalf("second %s run changed something:\n%s", mode, r)
			}
			if d := cmp.Diff(before, l.HashTree(t, "nuc1")); d != "" {
				t.Fatalf("second %s run changed files:\n%s", mode, d)
			}
		})
	}
}

// reportShape is what must not depend on how the node was reached: each
// result's play, task, host, status, planned file actions and restart.
func reportShape(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Play, Task, Module, Host, Status string
			Plan                             *struct {
				Files []struct {
					Action, Path string
				} `json:"files"`
				Restart any `json:"restart"`
			} `json:"plan"`
		} `json:"results"`
		Recap map[string]any `json:"recap"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report %s: %v", path, err)
	}
	var out []string
	for _, r := range rep.Results {
		line := fmt.Sprintf("%s | %s | %s | %s | %s", r.Play, r.Task, r.Module, r.Host, r.Status)
		if r.Plan != nil {
			for _, f := range r.Plan.Files {
				line += " | " + f.Action + " " + f.Path
			}
			if r.Plan.Restart != nil {
				line += fmt.Sprintf(" | restart %v", r.Plan.Restart)
			}
		}
		out = append(out, line)
	}
	out = append(out, fmt.Sprintf("recap %v", rep.Recap))
	return out
}

// inNode runs the binary inside the node's mount namespace, as a systemd
// unit on the node would: the node's files, its containerd and its
// systemctl are the ones the process sees.
func inNode(t *testing.T, l *labtest.Lab, node string, args ...string) result {
	t.Helper()
	return runCmd(t, exec.Command(labtest.Script(), append([]string{"exec", "--dir", l.Dir, node, "--", binary}, args...)...))
}

// withHostRoot runs the binary the way the DaemonSet does: in a mount
// namespace of its own (the pod's), with the node's whole root mounted at a
// path (a hostPath volume of / at /host), and --host-root at that path.
// The new namespace is made from the node's (a bind mount cannot take its
// source from another mount namespace), so the node's root is its /.
func withHostRoot(t *testing.T, l *labtest.Lab, node string, args ...string) result {
	t.Helper()
	host := filepath.Join(t.TempDir(), "host")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	// The paths are arguments of the inner sh, never part of its script.
	// After the node's root is at host, the pod's own view of the node's
	// paths is emptied (tmpfs over each), as a container's own root has
	// none of them: a run that used its own / instead of host would find
	// no containerd config, no systemctl and no state.
	script := `mount --rbind / "$1" && shift &&
for d in /etc/containerd /usr/local/sbin /var/lib/nodeconverge /run/containerd; do mount -t tmpfs pod "$d" || exit; done &&
exec "$@"`
	argv := append([]string{"exec", "--dir", l.Dir, node, "--",
		"unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh",
		host, binary, "--host-root", host}, args...)
	return runCmd(t, exec.Command(labtest.Script(), argv...))
}
