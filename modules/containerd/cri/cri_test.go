package cri

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The "config" entry of a real verbose CRI status, cut down: containerd
// 1.6 (sandboxImage, options with every field) and 2.x (no sandboxImage).
const (
	config16 = `{"containerd":{"snapshotter":"overlayfs","defaultRuntimeName":"runc","runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{"BinaryName":"","IoGid":0,"SystemdCgroup":true}},"nvidia":{"runtimeType":"io.containerd.runc.v2","options":{"BinaryName":"/usr/local/nvidia/toolkit/nvidia-container-runtime","SystemdCgroup":true}}}},"sandboxImage":"registry.k8s.io/pause:3.9"}`
	config2x = `{"containerd":{"defaultRuntimeName":"runc","runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{"SystemdCgroup":false},"sandboxer":"podsandbox"}}}}`
)

func TestApplyConfigAndHandlers(t *testing.T) {
	r := &Report{SandboxImage: "from-dump"}
	if err := r.applyConfig([]byte(config16)); err != nil {
		t.Fatal(err)
	}
	if r.DefaultRuntime != "runc" || r.SandboxImage != "registry.k8s.io/pause:3.9" {
		t.Errorf("default %q, sandbox image %q: the daemon's own answer must win", r.DefaultRuntime, r.SandboxImage)
	}
	if d := cmp.Diff([]string{"nvidia", "runc"}, r.Loaded); d != "" {
		t.Errorf("loaded (-want +got):\n%s", d)
	}
	r.handlers([]string{"nvidia", "nvidia-cdi"})
	var names []string
	for _, h := range r.Handlers {
		names = append(names, h.Name)
	}
	// The play's runtimes, then the default one.
	if d := cmp.Diff([]string{"nvidia", "nvidia-cdi", "runc"}, names); d != "" {
		t.Fatalf("handlers (-want +got):\n%s", d)
	}
	nv := r.Handler("nvidia")
	if !nv.Loaded || nv.Status != Unproven || nv.RuntimeType != "io.containerd.runc.v2" || nv.Options["BinaryName"] != "/usr/local/nvidia/toolkit/nvidia-container-runtime" {
		t.Errorf("nvidia = %+v", nv)
	}
	if _, ok := r.Handler("runc").Options["IoGid"]; ok {
		t.Error("zero options are noise and must be left out")
	}
	cdi := r.Handler("nvidia-cdi")
	if cdi.Status != Failed || !strings.Contains(cdi.Reason, `no runtime handler "nvidia-cdi"`) || !strings.Contains(cdi.Reason, "nvidia, runc") {
		t.Errorf("a handler the daemon did not load = %+v", cdi)
	}

	r2 := &Report{SandboxImage: "registry.k8s.io/pause:3.10"}
	if err := r2.applyConfig([]byte(config2x)); err != nil {
		t.Fatal(err)
	}
	if r2.SandboxImage != "registry.k8s.io/pause:3.10" {
		t.Errorf("2.x does not report the sandbox image; the dump's must stay, got %q", r2.SandboxImage)
	}
	if err := (&Report{}).applyConfig([]byte("{")); err == nil {
		t.Error("garbage config accepted")
	}
}

func TestNotReady(t *testing.T) {
	ok := []Condition{{Type: "RuntimeReady", Status: true}, {Type: "NetworkReady", Reason: "NetworkPluginNotReady"}}
	if msg := notReady(ok); msg != "" {
		t.Errorf("a node without CNI is not a broken runtime: %q", msg)
	}
	if msg := notReady([]Condition{{Type: "RuntimeReady", Reason: "Boom", Message: "shim gone"}}); !strings.Contains(msg, "RuntimeReady is false: Boom shim gone") {
		t.Errorf("not ready = %q", msg)
	}
	if msg := notReady(nil); msg == "" {
		t.Error("no RuntimeReady condition at all must fail")
	}
}

func TestReportVerdicts(t *testing.T) {
	proved := &Report{Via: ViaSocket, Handlers: []*Handler{{Name: "runc", Status: Proved}}}
	if !proved.OK() || proved.IsUnproven() {
		t.Errorf("proved: OK %v unproven %v", proved.OK(), proved.IsUnproven())
	}
	unreached := &Report{Unproven: "sshd refused"}
	if unreached.OK() || !unreached.IsUnproven() || !strings.HasPrefix(unreached.String(), "UNPROVEN: sshd refused") {
		t.Errorf("unreached: OK %v unproven %v %q", unreached.OK(), unreached.IsUnproven(), unreached.String())
	}
	if p := unreached.Proofs(); len(p) != 1 || p[0].Kind != "daemon" || p[0].Status != Unproven {
		t.Errorf("an unreached daemon's proofs = %+v", p)
	}
	failed := &Report{Via: ViaSocket, Handlers: []*Handler{{Name: "nvidia", Status: Failed, Reason: "RunPodSandbox: driver not loaded"}, {Name: "runc", Status: Proved}}}
	if failed.OK() || failed.IsUnproven() {
		t.Error("a failed handler is a failure, not unproven")
	}
	if s := failed.String(); !strings.Contains(s, "runtime nvidia failed: RunPodSandbox: driver not loaded") || !strings.Contains(s, "READY through runc") {
		t.Errorf("String = %q", s)
	}
	daemon := &Report{Failure: "sandbox image x is not on the node", Handlers: []*Handler{{Name: "runc", Status: Failed, Reason: "sandbox image x is not on the node"}}}
	if s := daemon.String(); strings.Count(s, "not on the node") != 1 {
		t.Errorf("a daemon failure is said once: %q", s)
	}
	skipped := &Report{Handlers: []*Handler{{Name: "runc", Status: Proved}}, Workload: &WorkloadResult{Status: Skipped}}
	if !skipped.OK() {
		t.Error("a skipped workload does not fail the proof")
	}
}

func TestCrictlRecords(t *testing.T) {
	out := "@version 0\n| RuntimeName:  containerd\n| RuntimeVersion:  1.6.20~ds1\n@info 0\n| {\"status\":{}}\n|\n@swept abc\n@handler 1 nvidia\n" +
		`| time="2026-12-02T06:01:48Z" level=warning msg="Config \"/etc/crictl.yaml\" does not exist"` + "\n" +
		`| time="2026-12-02T06:01:48Z" level=fatal msg="run pod sandbox: rpc error: code = Unknown desc = failed to create containerd task: nvidia-container-runtime: driver not loaded: unknown"` + "\n@end\n"
	recs := records(out)
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.key)
	}
	if d := cmp.Diff([]string{"version", "info", "swept", "handler", "end"}, keys); d != "" {
		t.Fatalf("records (-want +got):\n%s", d)
	}
	if v := versionOf(recs[0].text); v != "containerd 1.6.20~ds1" {
		t.Errorf("version = %q", v)
	}
	if recs[1].text != "{\"status\":{}}\n" || recs[2].arg != "abc" || recs[3].rc() != 1 {
		t.Errorf("records = %+v", recs)
	}
	if e := crictlError(recs[3].text); e != "run pod sandbox: rpc error: code = Unknown desc = failed to create containerd task: nvidia-container-runtime: driver not loaded: unknown" {
		t.Errorf("crictl error = %q", e)
	}
}

func TestExpected(t *testing.T) {
	if d := cmp.Diff([]string{"nvidia", "runc"}, expected([]string{"nvidia", "runc", "nvidia"}, "runc")); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]string{"runc"}, expected(nil, "runc")); d != "" {
		t.Error(d)
	}
}

// The proof's sandbox has a cgroup parent of the form a kubelet with the
// matching cgroup driver sends (a slice, a cgroupfs path), chosen by the
// handler's SystemdCgroup as the daemon reports it: without one, runc under
// SystemdCgroup refuses the sandbox a kubelet's pods would get.
func TestSandboxCgroupParent(t *testing.T) {
	r := &Report{}
	if err := r.applyConfig([]byte(config16)); err != nil {
		t.Fatal(err)
	}
	r.handlers([]string{"nvidia"})
	o := Options{RunID: "r1-2"}
	for _, h := range r.Handlers {
		got := sandboxConfig(o, "proof-"+h.Name, h.Name, systemdCgroup(h.Options)).GetLinux().GetCgroupParent()
		if want := "nodeconverge-proof.slice"; got != want {
			t.Errorf("%s (SystemdCgroup = true): cgroup parent %q, want %q", h.Name, got, want)
		}
	}
	r2 := &Report{}
	if err := r2.applyConfig([]byte(config2x)); err != nil {
		t.Fatal(err)
	}
	r2.handlers(nil)
	if got, want := sandboxConfig(o, "proof-runc", "runc", systemdCgroup(r2.Handlers[0].Options)).GetLinux().GetCgroupParent(), "/nodeconverge-proof"; got != want {
		t.Errorf("runc (SystemdCgroup = false): cgroup parent %q, want %q", got, want)
	}
	for _, tc := range []struct {
		opts map[string]any
		want bool
	}{
		{nil, false},
		{map[string]any{"SystemdCgroup": true}, true},
		{map[string]any{"systemd_cgroup": true}, true},
		{map[string]any{"SystemdCgroup": "true"}, true},
		{map[string]any{"SystemdCgroup": false, "BinaryName": "x"}, false},
	} {
		if got := systemdCgroup(tc.opts); got != tc.want {
			t.Errorf("systemdCgroup(%v) = %v, want %v", tc.opts, got, tc.want)
		}
	}
}
