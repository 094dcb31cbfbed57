package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/engine/transport"
	"nodeconverge/lab/labtest"
)

// proofGenerations are the containerd generations the proof by pod is
// proved on (issue 26: 1.6, 1.7 and 2.x).
var proofGenerations = []proofGeneration{
	{"1.6", labtest.Containerd16, 2, "io.containerd.grpc.v1.cri"},
	{"1.7", labtest.Containerd17, 2, "io.containerd.grpc.v1.cri"},
	{"2.x", labtest.Containerd2, 3, "io.containerd.cri.v1.runtime"},
}

// proofGeneration is one containerd generation a proof test runs on.
type proofGeneration struct {
	name    string
	gen     labtest.Generation
	version int // config version the generation's own files use
	plugin  string
}

// proofJSON is what these tests read of a JSON report.
type proofJSON struct {
	ExitCode int `json:"exit_code"`
	Results  []struct {
		Task    string `json:"task"`
		Host    string `json:"host"`
		Handler bool   `json:"handler"`
		Status  string `json:"status"`
		Msg     string `json:"msg"`
		Proofs  []struct {
			Kind        string            `json:"kind"`
			Name        string            `json:"name"`
			Status      string            `json:"status"`
			Reason      string            `json:"reason"`
			Detail      string            `json:"detail"`
			Via         string            `json:"via"`
			Output      string            `json:"output"`
			Loaded      bool              `json:"loaded"`
			RuntimeType string            `json:"runtime_type"`
			Options     map[string]string `json:"options"`
			Duration    int64             `json:"duration_ns"`
		} `json:"proofs"`
	} `json:"results"`
}

func readProofReport(t *testing.T, p string) proofJSON {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var r proofJSON
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report %s: %v", p, err)
	}
	return r
}

// proofsOf maps host -> runtime -> status of every proof of the results
// whose task starts with task.
func (r proofJSON) proofsOf(task string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, res := range r.Results {
		if !strings.HasPrefix(res.Task, task) {
			continue
		}
		for _, p := range res.Proofs {
			if out[res.Host] == nil {
				out[res.Host] = map[string]string{}
			}
			out[res.Host][p.Kind+" "+p.Name] = p.Status
		}
	}
	return out
}

var allProved = map[string]string{"runtime nvidia": "proved", "runtime nvidia-cdi": "proved", "runtime nvidia-legacy": "proved", "runtime runc": "proved"}

// noLeftovers fails when a node's containerd holds any pod sandbox or
// container as its CRI API lists them (what the kubelet would see), or any
// container or active snapshot in the CRI namespace.
func noLeftovers(t *testing.T, l *labtest.Lab, node string) {
	t.Helper()
	crictl := labtest.Crictl(t)
	for _, what := range [][]string{{"pods", "-q"}, {"ps", "-a", "-q"}} {
		out := l.Exec(t, node, append([]string{crictl, "--runtime-endpoint", "unix:///run/containerd/containerd.sock", "--timeout", "20s"}, what...)...)
		if left := strings.Fields(out); len(left) > 0 {
			t.Errorf("%s: crictl %s lists leftovers: %v", node, what[0], left)
		}
	}
	if left := l.Containers(t, node); len(left) > 0 {
		t.Errorf("%s: containers left behind: %v", node, left)
	}
	if left := l.ActiveSnapshots(t, node); len(left) > 0 {
		t.Errorf("%s: active snapshots left behind: %v", node, left)
	}
}

// brokenToolkit makes node's nvidia-container-runtime fail as the real
// one does when the driver or toolkit is broken: exit 1, its error written
// where runc's --log points (containerd reports only that for a sandbox).
func brokenToolkit(t *testing.T, l *labtest.Lab, node string) {
	t.Helper()
	script := `#!/bin/sh
printf '%s %s\n' "${0##*/}" "$*" >>/usr/local/nvidia/toolkit/invocations.log
log=
prev=
for a in "$@"; do
	[ "$prev" = --log ] && log=$a
	prev=$a
done
msg='nvidia-container-runtime: driver not loaded'
[ -n "$log" ] && printf '{"level":"error","msg":"%s","time":"%s"}\n' "$msg" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$log"
echo "$msg" >&2
exit 1
`
	if err := os.WriteFile(l.NodePath(node, "/usr/local/nvidia/toolkit/nvidia-container-runtime"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestProofIncidentConverges (issue 26): the shipped playbook converges the
// incident lab on every generation, and every node's restart is proved by a
// pod sandbox through runc, nvidia, nvidia-cdi and nvidia-legacy (the
// stand-in's log shows the nvidia calls), with nothing left behind. Then
// `apply --check --prove` on the converged lab proves every handler and
// writes no file; after one node's toolkit breaks it exits 1 naming the
// runtime and the daemon's error, in the JSON and Prometheus reports.
func TestProofIncidentConverges(t *testing.T) {
	for _, g := range proofGenerations {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident", ContainerdBin: labtest.Containerd(t, g.gen)})
			pb := shippedPlaybook()
			dir := t.TempDir()
			aj := filepath.Join(dir, "apply.json")
			r := nc(t, append([]string{"apply", "--report", "json=" + aj}, labArgs(l, pb)...)...)
			wantCode(t, r, 0)
			rep := readProofReport(t, aj)
			got := rep.proofsOf("restart containerd")
			for _, n := range l.Nodes {
				if d := cmp.Diff(allProved, got[n.Name]); d != "" {
					t.Errorf("%s: the restart's proofs (-want +got):\n%s\n%s", n.Name, d, r)
				}
				log, err := os.ReadFile(l.NodePath(n.Name, "/usr/local/nvidia/toolkit/invocations.log"))
				if err != nil {
					t.Fatalf("%s: no nvidia stand-in log: %v", n.Name, err)
				}
				for _, bin := range []string{"nvidia-container-runtime ", "nvidia-container-runtime.cdi ", "nvidia-container-runtime.legacy "} {
					if !strings.Contains(string(log), bin) {
						t.Errorf("%s: %s was never run:\n%s", n.Name, bin, log)
					}
				}
				noLeftovers(t, l, n.Name)
			}
			if !strings.Contains(r.stdout, "pod sandbox READY through nvidia") || !strings.Contains(r.stdout, "daemon unchanged across") {
				t.Errorf("the restart's message does not say what was proved:\n%s", r.stdout)
			}

			before := map[string]map[string]string{}
			for _, n := range l.Nodes {
				before[n.Name] = l.HashTree(t, n.Name)
			}
			cj, prom := filepath.Join(dir, "check.json"), filepath.Join(dir, "check.prom")
			r = nc(t, append([]string{"apply", "--check", "--prove", "--report", "json=" + cj, "--report", "prom=" + prom}, labArgs(l, pb)...)...)
			wantCode(t, r, 0)
			got = readProofReport(t, cj).proofsOf("prove: restart containerd")
			for _, n := range l.Nodes {
				if d := cmp.Diff(allProved, got[n.Name]); d != "" {
					t.Errorf("%s: --prove (-want +got):\n%s\n%s", n.Name, d, r)
				}
			}

			brokenToolkit(t, l, "nuc2")
			r = nc(t, append([]string{"apply", "--check", "--prove", "--report", "json=" + cj, "--report", "prom=" + prom}, labArgs(l, pb)...)...)
			wantCode(t, r, 1)
			rep = readProofReport(t, cj)
			got = rep.proofsOf("prove: restart containerd")
			if got["nuc2"]["runtime nvidia"] != "failed" || got["nuc2"]["runtime runc"] != "proved" || got["nuc1"]["runtime nvidia"] != "proved" {
				t.Errorf("after nuc2's toolkit broke: %v\n%s", got, r)
			}
			var reason string
			for _, res := range rep.Results {
				for _, p := range res.Proofs {
					if res.Host == "nuc2" && p.Name == "nvidia" {
						reason = p.Reason
					}
				}
			}
			if !strings.Contains(reason, "driver not loaded") {
				t.Errorf("nuc2's nvidia proof does not carry the runtime's error: %q", reason)
			}
			if !strings.Contains(r.stdout, "runtime nvidia FAILED") || !strings.Contains(r.stdout, "driver not loaded") {
				t.Errorf("the human output does not name the runtime and its error:\n%s", r.stdout)
			}
			pt, err := os.ReadFile(prom)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				`nodeconverge_runtime_proof{host="nuc2",kind="runtime",runtime="nvidia",status="failed"} 1`,
				`nodeconverge_runtime_proof{host="nuc1",kind="runtime",runtime="nvidia",status="proved"} 1`,
				`nodeconverge_runtime_proof_seconds{host="nuc1",runtime="nvidia-cdi"} `,
				`nodeconverge_failed{host="nuc2"} 1`,
			} {
				if !strings.Contains(string(pt), want) {
					t.Errorf("textfile lacks %q:\n%s", want, pt)
				}
			}
			for _, n := range l.Nodes {
				if d := cmp.Diff(before[n.Name], l.HashTree(t, n.Name)); d != "" {
					t.Errorf("%s: --prove changed files:\n%s", n.Name, d)
				}
				noLeftovers(t, l, n.Name)
			}
		})
	}
}

// faultPlaybook writes a drop-in (its content from the `dropin` variable)
// and restarts containerd, one node at a time, stopping at the first
// failure: the shape of the shipped playbook.
const faultPlaybook = `
- name: proof faults
  hosts: all
  serial: 1
  max_fail_percentage: 0
  tasks:
    - name: the drop-in under test
      copy:
        dest: /etc/containerd/conf.d/50-fault.toml
        content: "{{ dropin }}"
      notify: restart containerd
  handlers:
    - name: restart containerd
      containerd_restart:
        runtimes: [nvidia]
        timeout: 30s
        settle: 1s
`

// faultBase is the config the fault tests start from: the generation's
// own layout, runc and nvidia with systemd cgroups, drop-ins imported.
func faultBase(version int, plugin string) string {
	return fmt.Sprintf("version = %d\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n", version) +
		runtimesTOML(plugin, "io.containerd.runc.v2", "")
}

// runtimesTOML is the whole runtimes table (runc and nvidia, as the GPU
// Operator's drop-in carries it: on 1.x a drop-in that names the CRI plugin
// replaces all of it), with nvidia's runtime_type and extra option lines.
func runtimesTOML(plugin, nvidiaType, nvidiaExtra string) string {
	var b strings.Builder
	for _, rt := range []struct{ name, typ, bin string }{{"runc", "io.containerd.runc.v2", ""}, {"nvidia", nvidiaType, "/usr/local/nvidia/toolkit/nvidia-container-runtime"}} {
		fmt.Fprintf(&b, "[plugins.%q.containerd.runtimes.%s]\n  runtime_type = %q\n", plugin, rt.name, rt.typ)
		fmt.Fprintf(&b, "  [plugins.%q.containerd.runtimes.%s.options]\n    SystemdCgroup = true\n", plugin, rt.name)
		if rt.bin != "" {
			fmt.Fprintf(&b, "    BinaryName = %q\n%s", rt.bin, nvidiaExtra)
		}
	}
	return b.String()
}

// TestProofFaults (issue 26): on every generation, a handler that cannot
// start a sandbox fails the restart's gate naming the handler and carrying
// the daemon's error text; the node is rolled back (its files as before,
// containerd running, nothing left behind), the serial play stops before
// the next node, and the exit code is 1. The faults: an
// nvidia-container-runtime that exits 1, a mistyped runtime_type in a
// drop-in, an option the shim refuses, and (2.x) a config whose CRI
// service is disabled.
func TestProofFaults(t *testing.T) {
	for _, g := range proofGenerations {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
			first, second := l.Nodes[0].Name, l.Nodes[1].Name
			for _, n := range l.Nodes {
				if err := os.MkdirAll(l.NodePath(n.Name, "/etc/containerd/conf.d"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(l.NodePath(n.Name, "/etc/containerd/config.toml"), []byte(faultBase(g.version, g.plugin)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			pb := writePlaybook(t, faultPlaybook)
			run := func(dropin string) result {
				return nc(t, append([]string{"apply", "-e", dropinVar(dropin)}, labArgs(l, pb)...)...)
			}
			// The baseline: both nodes restart on it and prove.
			r := run(fmt.Sprintf("# baseline\nversion = %d\n", g.version))
			wantCode(t, r, 0)
			if strings.Count(r.stdout, "pod sandbox READY through nvidia") != 2 {
				t.Fatalf("baseline not proved on both nodes:\n%s", r)
			}
			faults := []struct {
				name   string
				dropin string
				before func()
				want   []string
			}{
				{
					name:   "nvidia-container-runtime exits 1",
					dropin: fmt.Sprintf("# the toolkit broke\nversion = %d\n", g.version),
					before: func() { brokenToolkit(t, l, first) },
					want:   []string{"runtime nvidia failed", "driver not loaded"},
				},
				{
					name:   "mistyped runtime_type",
					dropin: fmt.Sprintf("version = %d\n", g.version) + runtimesTOML(g.plugin, "io.containerd.runc.v22", ""),
					want:   []string{"runtime nvidia failed", "runc.v22"},
				},
				{
					name:   "an option the shim refuses",
					dropin: fmt.Sprintf("version = %d\n", g.version) + runtimesTOML(g.plugin, "io.containerd.runc.v2", "    ShimCgroup = \"/nodeconverge-no-such-cgroup\"\n"),
					want:   []string{"runtime nvidia failed", "nodeconverge-no-such-cgroup"},
				},
			}
			if g.version >= 3 {
				faults = append(faults, struct {
					name   string
					dropin string
					before func()
					want   []string
				}{
					name:   "CRI service disabled",
					dropin: "version = 3\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n",
					want:   []string{"does not serve the CRI API"},
				}, struct {
					name   string
					dropin string
					before func()
					want   []string
				}{
					// Docker's containerd.io config as it ships (version 1,
					// `disabled_plugins = ["cri"]`): 2.x migrates "cri" to
					// the CRI gRPC service and disables it, while its
					// runtime and images plugins load (what the gate's
					// plugin check alone saw as healthy).
					name:   `Docker's disabled_plugins = ["cri"]`,
					dropin: string(must(os.ReadFile(filepath.Join("testdata", "docker-containerd", "containerd.toml")))),
					want:   []string{"does not serve the CRI API"},
				})
			}
			stand := l.NodePath(first, "/usr/local/nvidia/toolkit/nvidia-container-runtime")
			good, err := os.ReadFile(stand)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range faults {
				t.Run(f.name, func(t *testing.T) {
					before := map[string]map[string]string{first: l.HashTree(t, first), second: l.HashTree(t, second)}
					if f.before != nil {
						f.before()
					}
					r := run(f.dropin)
					// The stand-in goes back for the next fault either way.
					if err := os.WriteFile(stand, good, 0o755); err != nil {
						t.Fatal(err)
					}
					wantCode(t, r, 1)
					for _, want := range append([]string{"failed its health gates", "rolled back /etc/containerd/conf.d/50-fault.toml"}, f.want...) {
						if !strings.Contains(r.stdout, want) {
							t.Errorf("the output does not say %q:\n%s", want, r)
						}
					}
					if !strings.Contains(r.stdout, "not attempted") || strings.Contains(r.stdout, "changed: ["+second+"]") {
						t.Errorf("the serial play did not stop before %s:\n%s", second, r)
					}
					for _, n := range []string{first, second} {
						if d := cmp.Diff(before[n], l.HashTree(t, n)); d != "" {
							t.Errorf("%s: files not as before:\n%s", n, d)
						}
						if st := strings.TrimSpace(l.Exec(t, n, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
							t.Errorf("%s: containerd is %s", n, st)
						}
						noLeftovers(t, l, n)
					}
				})
			}
		})
	}
}

// TestProofUnprovenWithoutForwarding (issue 26), on every generation: an
// sshd with `AllowStreamLocalForwarding no` cannot carry the CRI socket.
// Without crictl on the node the gate says unproven and why, and the
// restart fails (rolled back, exit 1): never a green result. With crictl on
// the node the fallback proves every handler and leaves nothing behind.
func TestProofUnprovenWithoutForwarding(t *testing.T) {
	for _, g := range proofGenerations {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			cfg := l.NodePath(node, "/etc/containerd/config.toml")
			if err := os.MkdirAll(l.NodePath(node, "/etc/containerd/conf.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, []byte(faultBase(g.version, g.plugin)), 0o644); err != nil {
				t.Fatal(err)
			}
			sshdCfg := filepath.Join(l.Dir, "nodes", node, "sshd_config")
			b, err := os.ReadFile(sshdCfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(sshdCfg, append(b, []byte("AllowStreamLocalForwarding no\n")...), 0o644); err != nil {
				t.Fatal(err)
			}
			l.StopSSHD(t, node)
			l.StartSSHD(t, node)
			pb := writePlaybook(t, faultPlaybook)
			dropin := dropinVar(fmt.Sprintf("version = %d\n", g.version))
			before := l.HashTree(t, node)
			r := nc(t, append([]string{"apply", "-e", dropin}, labArgs(l, pb)...)...)
			wantCode(t, r, 1)
			for _, want := range []string{"is not proved", "UNPROVEN", "AllowStreamLocalForwarding", "crictl is not on the node's PATH", "rolled back"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("without forwarding or crictl: the output does not say %q:\n%s", want, r)
				}
			}
			if strings.Contains(r.stdout, "healthy after") && !strings.Contains(r.stdout, "restarted on the previous files") {
				t.Errorf("an unproven restart was called healthy:\n%s", r)
			}
			if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
				t.Errorf("files not as before:\n%s", d)
			}

			l.InstallCrictl(t, node)
			dir := t.TempDir()
			aj := filepath.Join(dir, "apply.json")
			r = nc(t, append([]string{"apply", "-e", dropin, "--report", "json=" + aj}, labArgs(l, pb)...)...)
			wantCode(t, r, 0)
			got := readProofReport(t, aj)
			proved := 0
			for _, res := range got.Results {
				if res.Task != "restart containerd" {
					continue
				}
				if len(res.Proofs) != 2 {
					t.Fatalf("want nvidia and runc proved through crictl, got %+v", res.Proofs)
				}
				for _, p := range res.Proofs {
					if p.Status != "proved" || !strings.Contains(p.Via, "crictl") || !strings.Contains(p.Via, "AllowStreamLocalForwarding") {
						t.Errorf("proof %+v: want proved through crictl, saying why", p)
					}
					proved++
				}
			}
			if proved != 2 {
				t.Errorf("the restart's result carries %d proofs, want 2:\n%s", proved, r)
			}
			noLeftovers(t, l, node)
		})
	}
}

// TestProofKilledMidProof (issue 26), on every generation: nodeconverge
// killed with SIGKILL while its proof has a sandbox up leaves that sandbox;
// the next run (its restart still owed) removes it, says so, and leaves
// nothing behind.
func TestProofKilledMidProof(t *testing.T) {
	for _, g := range proofGenerations {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			// The nvidia stand-in holds the proof while a block file exists, at
			// the point where its sandbox is READY and being stopped.
			tk, fault := faultyNvidiaNode(t, l, node, g)
			fault(`case " $* " in *" kill "*)
	if [ -e /usr/local/nvidia/toolkit/block ]; then
		: >/usr/local/nvidia/toolkit/blocked
		while [ -e /usr/local/nvidia/toolkit/block ]; do sleep 0.1; done
	fi ;;
esac
`)
			if err := os.WriteFile(filepath.Join(tk, "block"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			pb := writePlaybook(t, faultPlaybook)
			dropin := dropinVar(fmt.Sprintf("version = %d\n", g.version))
			a, aout := start(t, append([]string{"apply", "-e", dropin}, labArgs(l, pb)...)...)
			waitFile(t, filepath.Join(tk, "blocked"), 2*time.Minute)
			if err := a.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := a.Wait(); err == nil {
				t.Fatalf("killed run exited 0:\n%s", aout)
			}
			if err := os.Remove(filepath.Join(tk, "block")); err != nil {
				t.Fatal(err)
			}
			if left := l.Containers(t, node); len(left) == 0 {
				t.Fatalf("the killed proof left no sandbox to sweep:\n%s", aout)
			}
			r, _ := ncBounded(t, 3*time.Minute, append([]string{"apply", "-e", dropin}, labArgs(l, pb)...)...)
			wantCode(t, r, 0)
			if !strings.Contains(r.stdout, "owed since run") || !strings.Contains(r.stdout, "leftover proof sandbox") {
				t.Errorf("the next run did not run the owed restart and sweep the leftover:\n%s", r)
			}
			noLeftovers(t, l, node)
		})
	}
}

// TestProofTimesOutMidProof (issue 26), on every generation: a runtime
// whose create hangs holds its sandbox past the handler's deadline. The
// gate fails naming nvidia and the deadline, the node is rolled back with
// containerd running, the serial play stops; once the runtime answers
// again, the next run proves every handler and nothing of the timed-out
// proof is left behind.
func TestProofTimesOutMidProof(t *testing.T) {
	for _, g := range proofGenerations {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			// The nvidia stand-in's first create hangs until the test
			// releases it: a runtime that does not answer.
			tk, fault := faultyNvidiaNode(t, l, node, g)
			fault(`case " $* " in *" create "*)
	if [ ! -e /usr/local/nvidia/toolkit/hung ]; then
		: >/usr/local/nvidia/toolkit/hung
		while [ ! -e /usr/local/nvidia/toolkit/release ]; do sleep 0.1; done
	fi ;;
esac
`)
			pb := writePlaybook(t, strings.Replace(faultPlaybook, "timeout: 30s", "timeout: 15s", 1))
			dropin := dropinVar(fmt.Sprintf("version = %d\n", g.version))
			before := l.HashTree(t, node)
			r, _ := ncBounded(t, 3*time.Minute, append([]string{"apply", "-e", dropin}, labArgs(l, pb)...)...)
			// Released whatever the outcome, so the lab can stop.
			if err := os.WriteFile(filepath.Join(tk, "release"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			wantCode(t, r, 1)
			for _, want := range []string{"runtime nvidia failed", "deadline", "failed its health gates", "rolled back /etc/containerd/conf.d/50-fault.toml"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the timed-out proof: the output does not say %q:\n%s", want, r)
				}
			}
			if _, err := os.Stat(filepath.Join(tk, "hung")); err != nil {
				t.Fatalf("the nvidia runtime's create was never held: %v\n%s", err, r)
			}
			if d := cmp.Diff(before, l.HashTree(t, node)); d != "" {
				t.Errorf("files not as before:\n%s", d)
			}
			if st := strings.TrimSpace(l.Exec(t, node, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
				t.Errorf("containerd is %s after the timed-out proof", st)
			}
			if strings.Contains(r.stdout, "stopped answering") {
				t.Errorf("a proof that ran out of time blames the daemon, which kept answering:\n%s", r)
			}
			// The proof removed its own sandboxes after its deadline.
			noLeftovers(t, l, node)
			r, _ = ncBounded(t, 3*time.Minute, append([]string{"apply", "-e", dropin}, labArgs(l, pb)...)...)
			wantCode(t, r, 0)
			if !strings.Contains(r.stdout, "pod sandbox READY through") {
				t.Errorf("the next run did not prove:\n%s", r)
			}
			noLeftovers(t, l, node)

			// A check-mode proof has no rollback whose own proof would
			// clean up after it: its sandbox through nvidia is READY,
			// then the runtime's kill takes 25s, past the 15s deadline.
			// The proof still removes it (a fresh, bounded context)
			// before the run ends.
			fault(`case " $* " in *" kill "*)
	if [ ! -e /usr/local/nvidia/toolkit/slow-kill ]; then
		: >/usr/local/nvidia/toolkit/slow-kill
		sleep 25
	fi ;;
esac
`)
			r, _ = ncBounded(t, 3*time.Minute, append([]string{"apply", "--check", "--prove", "-e", dropin}, labArgs(l, pb)...)...)
			wantCode(t, r, 1)
			if !strings.Contains(r.stdout, "runtime nvidia FAILED") || !strings.Contains(r.stdout, "deadline") {
				t.Errorf("the check's timed-out proof does not name nvidia and the deadline:\n%s", r)
			}
			if _, err := os.Stat(filepath.Join(tk, "slow-kill")); err != nil {
				t.Fatalf("the nvidia runtime's kill was never slowed: %v\n%s", err, r)
			}
			noLeftovers(t, l, node)
		})
	}
}

// TestFaultDaemonDiesAfterGate (issue 29 item 6): a containerd that starts,
// answers, and is killed 3 s later must not leave the run healthy with
// containerd down. The gate watches the daemon across its settle window
// (default 5s): its CRI stream ends, the gate fails, the node is rolled
// back and restarted, and the run exits 1 saying why.
func TestFaultDaemonDiesAfterGate(t *testing.T) {
	for _, g := range restartGenerations {
		t.Run(g.name, func(t *testing.T) {
			l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
			node := l.Nodes[0].Name
			nd := filepath.Join(l.Dir, "nodes", node)
			real := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(nd, "containerd-bin")))))
			// The fault: this daemon dies 3 s after it starts, once.
			wrap := filepath.Join(nd, "containerd-dies")
			// Both paths are data in the script: the repository's (real)
			// may hold a space.
			script := fmt.Sprintf("#!/bin/sh\nif [ ! -e %[1]s ]; then : >%[1]s; (sleep 3; kill -9 $$) & fi\nexec %[2]s \"$@\"\n", transport.ShellQuote(filepath.Join(nd, "died-once")), transport.ShellQuote(real))
			if err := os.WriteFile(wrap, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(real + "-shim-runc-v2"); err == nil {
				if err := os.Symlink(real+"-shim-runc-v2", wrap+"-shim-runc-v2"); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(nd, "containerd-bin"), []byte(wrap+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			pb := writePlaybook(t, `
- name: restart once
  hosts: all
  tasks:
    - name: a harmless change
      copy:
        dest: /etc/containerd/conf.d/50-note.toml
        content: "# note\n"
      notify: restart containerd
  handlers:
    - name: restart containerd
      containerd_restart:
        runtimes: []
        timeout: 30s
`)
			r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
			wantCode(t, r, 1)
			for _, want := range []string{"failed its health gates", "rolled back /etc/containerd/conf.d/50-note.toml", "restarted on the previous files: healthy"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the output does not say %q:\n%s", want, r)
				}
			}
			// Killed within the settle window after the proof, during it,
			// or (on a slow machine) before the proof reached the socket:
			// whichever, the daemon's loss is what the gate names, never
			// a forwarding problem.
			if !strings.Contains(r.stdout, "did not stay up across the 5s settle window") && !strings.Contains(r.stdout, "Unavailable") &&
				!strings.Contains(r.stdout, "the daemon died after it answered its health gates") {
				t.Errorf("the gate does not name the daemon's death:\n%s", r)
			}
			if st := strings.TrimSpace(l.Exec(t, node, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
				t.Errorf("containerd is %s after the run", st)
			}
		})
	}
}

// faultyNvidiaNode gives node the fault tests' base config (conf.d
// imported) and returns the toolkit's directory on the host (where the
// faults' marker files are) and a function that puts shell before the
// nvidia stand-in's `exec runc`, replacing any fault set before: a test
// holds, hangs or slows the runtime at a call it chooses.
func faultyNvidiaNode(t *testing.T, l *labtest.Lab, node string, g proofGeneration) (string, func(snippet string)) {
	t.Helper()
	if err := os.MkdirAll(l.NodePath(node, "/etc/containerd/conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.NodePath(node, "/etc/containerd/config.toml"), []byte(faultBase(g.version, g.plugin)), 0o644); err != nil {
		t.Fatal(err)
	}
	tk := l.NodePath(node, "/usr/local/nvidia/toolkit")
	stand := filepath.Join(tk, "nvidia-container-runtime")
	good, err := os.ReadFile(stand)
	if err != nil {
		t.Fatal(err)
	}
	return tk, func(snippet string) {
		t.Helper()
		faulty := strings.Replace(string(good), "exec runc", snippet+"exec runc", 1)
		if faulty == string(good) {
			t.Fatalf("the nvidia stand-in has no `exec runc` to put the fault before:\n%s", good)
		}
		if err := os.WriteFile(stand, []byte(faulty), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// dropinVar is the -e value that sets faultPlaybook's drop-in content.
func dropinVar(content string) string {
	b, err := json.Marshal(map[string]string{"dropin": content})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestProofWorkloadAndMissingImage (issue 26): the optional workload proof
// runs one container through a handler from an image already on the node
// and puts its judged output in the report; on a node without a GPU it is
// skipped, saying so, unless needs_gpu: false. A sandbox image that is not
// on the node is a failure naming the image and what to do; nothing pulls.
func TestProofWorkloadAndMissingImage(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean"})
	node := l.Nodes[0].Name
	if err := os.WriteFile(l.NodePath(node, "/etc/containerd/config.toml"), []byte(faultBase(2, "io.containerd.grpc.v1.cri")), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Exec(t, node, "systemctl", "restart", "containerd")
	play := func(extra string) string {
		return writePlaybook(t, `
- name: prove only
  hosts: all
  tasks: []
  handlers:
    - name: restart containerd
      containerd_restart:
        runtimes: [nvidia]
        workload:
          runtime: nvidia
          image: registry.k8s.io/pause:3.9
          command: ["/pause", "-echo", "GPU 0: lab stand-in (UUID: GPU-lab)"]
          env: {NVIDIA_VISIBLE_DEVICES: all}
          expect: "^GPU 0:"
`+extra)
	}
	dir := t.TempDir()
	j := filepath.Join(dir, "r.json")
	r := nc(t, append([]string{"apply", "--check", "--prove", "--report", "json=" + j}, labArgs(l, play("          needs_gpu: false\n"))...)...)
	wantCode(t, r, 0)
	var workload map[string]string
	for _, res := range readProofReport(t, j).Results {
		for _, p := range res.Proofs {
			if p.Kind == "workload" {
				workload = map[string]string{"status": p.Status, "output": p.Output, "name": p.Name}
			}
		}
	}
	if workload["status"] != "proved" || workload["output"] != "GPU 0: lab stand-in (UUID: GPU-lab)" || workload["name"] != "nvidia" {
		t.Errorf("workload proof = %v\n%s", workload, r)
	}
	noLeftovers(t, l, node)

	r = nc(t, append([]string{"apply", "--check", "--prove"}, labArgs(l, play(""))...)...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "workload nvidia SKIPPED: this node has no NVIDIA GPU") {
		t.Errorf("a node without a GPU must skip the workload, saying so:\n%s", r)
	}

	// explain shows each runtime as the daemon loaded it, next to its
	// effective keys; only with --prove does it start a sandbox.
	r = nc(t, append([]string{"explain", "-l", node}, labArgs(l)...)...)
	wantCode(t, r, 0)
	for _, want := range []string{"runtimes as the running daemon loaded them", "nvidia: loaded by the daemon, runtime_type io.containerd.runc.v2, BinaryName=/usr/local/nvidia/toolkit/nvidia-container-runtime, SystemdCgroup=true",
		`options.BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"  <- /etc/containerd/config.toml`, "sandbox: not started (--prove starts and removes one)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain does not say %q:\n%s", want, r)
		}
	}
	r = nc(t, append([]string{"explain", "--prove", "-l", node}, labArgs(l)...)...)
	wantCode(t, r, 0)
	if strings.Count(r.stdout, "sandbox: started through it, READY, removed") != 2 {
		t.Errorf("explain --prove does not prove nvidia and runc:\n%s", r)
	}
	noLeftovers(t, l, node)

	// The node's configured sandbox image (1.6's default) goes away.
	l.Exec(t, node, "ctr", "-n", "k8s.io", "images", "rm", "registry.k8s.io/pause:3.6")
	r = nc(t, append([]string{"apply", "--check", "--prove"}, labArgs(l, play(""))...)...)
	wantCode(t, r, 1)
	for _, want := range []string{"sandbox image registry.k8s.io/pause:3.6 is not on the node", "crictl pull registry.k8s.io/pause:3.6", "allow_pull: true"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("a missing sandbox image: the output does not say %q:\n%s", want, r)
		}
	}
	if out := l.Exec(t, node, "ctr", "-n", "k8s.io", "images", "ls", "-q"); strings.Contains(out, "pause:3.6") {
		t.Errorf("the proof pulled the missing image:\n%s", out)
	}
	noLeftovers(t, l, node)
}
