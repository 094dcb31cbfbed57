package containerd_restart

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/lab/labtest"
	"nodeconverge/lab/labtest/labssh"
)

// generation is one containerd generation's config layout.
type generation struct {
	gen     labtest.Generation
	version int
	plugin  string // where runtimes live
}

var generations = []generation{
	{gen: labtest.Containerd16, version: 2, plugin: "io.containerd.grpc.v1.cri"},
	{gen: labtest.Containerd2, version: 3, plugin: "io.containerd.cri.v1.runtime"},
}

// healthy is a config with the three nvidia runtimes.
func (g generation) healthy() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version = %d\n", g.version)
	// runc too: on 1.x a runtimes table replaces the built-in one, and the
	// default runtime is runc.
	fmt.Fprintf(&b, "[plugins.%q.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n", g.plugin)
	for _, r := range []string{"nvidia", "nvidia-cdi", "nvidia-legacy"} {
		fmt.Fprintf(&b, "[plugins.%q.containerd.runtimes.%s]\n  runtime_type = \"io.containerd.runc.v2\"\n", g.plugin, r)
		fmt.Fprintf(&b, "  [plugins.%q.containerd.runtimes.%s.options]\n    BinaryName = \"/usr/local/nvidia/toolkit/nvidia-container-runtime\"\n", g.plugin, r)
	}
	return b.String()
}

// broken makes the CRI plugin fail to load while the daemon runs: a default
// runtime that no runtimes table defines (docs/containerd-versions.md §6).
func (g generation) broken() string {
	return fmt.Sprintf("version = %d\n[plugins.%q.containerd]\n  default_runtime_name = \"nvidia\"\n", g.version, g.plugin)
}

func TestLabRestartGates(t *testing.T) {
	for _, g := range generations {
		t.Run(string(g.gen), func(t *testing.T) {
			testRestartGates(t, g)
		})
	}
}

func testRestartGates(t *testing.T, g generation) {
	ctx := context.Background()
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
	n := l.Nodes[0]
	conn := labssh.Dial(t, l, n)
	const cfg = "/etc/containerd/config.toml"
	m := Module{}
	args := m.NewArgs().(*Args)
	args.Timeout = "20s"
	if err := args.Validate(); err != nil {
		t.Fatal(err)
	}

	// Run 1: a good config, restart, gates pass.
	h1 := node.NewHost(conn, node.HostOptions{RunID: "run-1"})
	if _, err := h1.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: cfg, Content: []byte(g.healthy()), Backup: true}}); err != nil {
		t.Fatal(err)
	}
	plan, err := m.Check(ctx, transport.ReadOnly(h1), args)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Restart) != 1 || plan.Restart[0] != "containerd" || !plan.Changed() {
		t.Fatalf("plan = %+v, want a containerd restart", plan)
	}
	before := h1.Stats()
	res, err := m.Apply(ctx, h1, plan)
	if err != nil {
		t.Fatalf("restart on a healthy config: %v", err)
	}
	// The proof costs one stream to the daemon's socket and no script of
	// its own: the restart's round trip carries the gate's reads, and the
	// only other one is the dump of a tree no plan proved here (this test
	// wrote the config without a Check).
	if st := h1.Stats(); st.SocketDials-before.SocketDials != 1 || st.RoundTrips-before.RoundTrips > 2 {
		t.Errorf("the restart and its proof took %d round trips and %d socket streams, want at most 2 and 1",
			st.RoundTrips-before.RoundTrips, st.SocketDials-before.SocketDials)
	}
	t.Logf("result: %s", res.Msg)
	for _, want := range []string{"io.containerd.grpc.v1 cri ok", "runtimes nvidia, nvidia-cdi, nvidia-legacy, runc present",
		"pod sandbox READY through nvidia", "nvidia-cdi", "nvidia-legacy", "runc", "daemon unchanged across"} {
		if !strings.Contains(res.Msg, want) {
			t.Errorf("result %q does not say %q", res.Msg, want)
		}
	}
	if g.version >= 3 && !strings.Contains(res.Msg, "io.containerd.cri.v1 runtime ok") {
		t.Errorf("2.x result %q does not gate on io.containerd.cri.v1 runtime", res.Msg)
	}
	// The proof by pod: one proved sandbox per runtime, the default one
	// included, each started through its handler and gone again.
	proved := map[string]bool{}
	for _, p := range res.Proofs {
		if p.Kind == "runtime" && p.Status == module.ProofProved && p.Loaded && p.RuntimeType == "io.containerd.runc.v2" {
			proved[p.Name] = true
		}
	}
	for _, h := range []string{"nvidia", "nvidia-cdi", "nvidia-legacy", "runc"} {
		if !proved[h] {
			t.Errorf("runtime %s not proved: %+v", h, res.Proofs)
		}
	}
	if left := l.Containers(t, n.Name); len(left) > 0 {
		t.Errorf("the proof left containers behind: %v", left)
	}
	if left := l.ActiveSnapshots(t, n.Name); len(left) > 0 {
		t.Errorf("the proof left active snapshots behind: %v", left)
	}
	if log, err := os.ReadFile(l.NodePath(n.Name, "/usr/local/nvidia/toolkit/invocations.log")); err != nil || !strings.Contains(string(log), "nvidia-container-runtime ") || !strings.Contains(string(log), " create ") {
		t.Errorf("the nvidia stand-in was not run for a sandbox: %q %v", log, err)
	}

	// Run 2: a change that kills the CRI plugin. The handler must roll the
	// file back, restart again and report both rounds.
	h2 := node.NewHost(conn, node.HostOptions{RunID: "run-2"})
	if _, err := h2.Apply(ctx, []transport.Op{
		{Kind: transport.OpWrite, Path: cfg, Content: []byte(g.broken()), Backup: true},
		{Kind: transport.OpWrite, Path: "/etc/containerd/conf.d/50-new.toml", Content: []byte("version = 2\n"), Backup: true},
	}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Apply(ctx, h2, plan)
	var ge *GateError
	if !errors.As(err, &ge) {
		t.Fatalf("restart on a broken config: err = %v, want *GateError", err)
	}
	msg := err.Error()
	t.Logf("gate error: %s", msg)
	for _, want := range []string{
		"failed its health gates after the restart: CRI plugin did not load",
		"cri error",
		"no corresponding runtime configured",
		"rolled back /etc/containerd/conf.d/50-new.toml, /etc/containerd/config.toml",
		"restarted on the previous files: healthy after",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("gate error does not say %q:\n%s", want, msg)
		}
	}
	if !ge.SecondOK || ge.RollbackErr != nil {
		t.Errorf("second round ok=%v rollback err=%v", ge.SecondOK, ge.RollbackErr)
	}
	if got, err := os.ReadFile(l.NodePath(n.Name, cfg)); err != nil || string(got) != g.healthy() {
		t.Errorf("config after rollback = %q, %v; want run 1's", got, err)
	}
	if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/conf.d/50-new.toml")); !os.IsNotExist(err) {
		t.Errorf("file created by the failed run still there: %v", err)
	}
	out := l.Exec(t, n.Name, "ctr", "--address", "/run/containerd/containerd.sock", "plugins", "ls", "id==cri")
	if !strings.Contains(out, " ok") {
		t.Errorf("CRI after the second restart:\n%s", out)
	}
}

func TestCheckIsImperativeAndPlansRestart(t *testing.T) {
	m := Module{}
	a := m.NewArgs().(*Args)
	if reg, ok := module.Lookup("containerd_restart"); !ok || !reg.Imperative {
		t.Fatal("containerd_restart must be imperative")
	}
	p, err := m.Check(context.Background(), nil, a)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Changed() || p.Commands[0] != "systemctl restart containerd" {
		t.Errorf("plan = %+v", p)
	}
	var _ module.Module = m
	for _, bad := range []string{"0s", "-1s", "soon"} {
		a.Timeout = bad
		if a.Validate() == nil {
			t.Errorf("timeout %q accepted", bad)
		}
	}
	a.Timeout = "90"
	if d, err := a.timeout(); err != nil || d != 90*time.Second {
		t.Errorf("timeout 90 = %v, %v", d, err)
	}
}
