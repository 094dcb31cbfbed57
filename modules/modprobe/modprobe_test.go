package modprobe

import (
	"context"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

// node is a canned node: lsmod's output, the modprobe -n answer and the
// files of /etc/modules-load.d and /etc/modprobe.d.
type node struct {
	lsmod string
	dryRC int
	files map[string]string
}

func (n node) Host() string { return "n1" }
func (n node) Stage(context.Context, transport.StageRequest) ([]*transport.CmdResult, error) {
	return nil, nil
}
func (n node) Query(_ context.Context, q transport.Query) (*transport.Snapshot, error) {
	s := &transport.Snapshot{Files: map[string]*transport.FileInfo{}, Globs: map[string][]string{}}
	all := map[string]string{"/proc/sys/kernel/osrelease": "6.1.0\n", "/lib/modules/6.1.0/modules.builtin": "kernel/fs/ext4/ext4.ko\n"}
	for p, c := range n.files {
		all[p] = c
	}
	for p, c := range all {
		s.Files[p] = &transport.FileInfo{Path: p, Exists: true, Content: []byte(c)}
	}
	for _, g := range q.Globs {
		for p := range all {
			if ok, _ := transport.ShellMatch(g, p); ok {
				s.Globs[g] = append(s.Globs[g], p)
			}
		}
	}
	s.Cmds = []*transport.CmdResult{{Stdout: []byte("Module Size Used by\n" + n.lsmod)}, {ExitCode: n.dryRC, Stderr: []byte("modprobe: FATAL: Module x not found")}}
	return s, nil
}

func plan(t *testing.T, a Args, n node) (*module.Plan, error) {
	t.Helper()
	full := Module{}.NewArgs().(*Args)
	full.Name, full.Params = a.Name, a.Params
	if a.State != "" {
		full.State = a.State
	}
	if a.Persistent != "" {
		full.Persistent = a.Persistent
	}
	if err := full.Validate(); err != nil {
		t.Fatal(err)
	}
	return Module{}.Check(context.Background(), n, full)
}

func planned(p *module.Plan) map[string]string {
	out := map[string]string{}
	for _, f := range p.Files {
		out[f.Path] = string(f.After)
	}
	return out
}

// TestDecisions: community.general.modprobe's main(), case by case.
func TestDecisions(t *testing.T) {
	p, err := plan(t, Args{Name: "br_netfilter"}, node{})
	if err != nil || strings.Join(p.Commands, ";") != "modprobe br_netfilter" || len(p.Files) != 0 {
		t.Errorf("load: %+v %v", p, err)
	}
	p, _ = plan(t, Args{Name: "br-netfilter"}, node{lsmod: "br_netfilter 32768 0\n"})
	if p.Changed() {
		t.Errorf("loaded (- as _): %+v", p)
	}
	p, _ = plan(t, Args{Name: "ext4"}, node{})
	if p.Changed() {
		t.Errorf("built in: %+v", p)
	}
	if _, err = plan(t, Args{Name: "nope"}, node{dryRC: 1}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown module: %v", err)
	}
	p, _ = plan(t, Args{Name: "overlay", State: "absent"}, node{lsmod: "overlay 1 0\n"})
	if strings.Join(p.Commands, ";") != "modprobe -r overlay" {
		t.Errorf("unload: %+v", p)
	}
	p, _ = plan(t, Args{Name: "nvidia", Params: "NVreg_EnableGpuFirmware=0 NVreg_OpenRmEnableUnsupportedGpus=1", Persistent: "present"}, node{})
	want := map[string]string{"/etc/modules-load.d/nvidia.conf": "nvidia\n", "/etc/modprobe.d/nvidia.conf": "options nvidia NVreg_EnableGpuFirmware=0\noptions nvidia NVreg_OpenRmEnableUnsupportedGpus=1\n"}
	if got := planned(p); len(got) != 2 || got["/etc/modules-load.d/nvidia.conf"] != want["/etc/modules-load.d/nvidia.conf"] || got["/etc/modprobe.d/nvidia.conf"] != want["/etc/modprobe.d/nvidia.conf"] {
		t.Errorf("persistent present: %q", got)
	}
	// Already persistent in another file, with the same params: nothing.
	p, _ = plan(t, Args{Name: "overlay", Persistent: "present"}, node{lsmod: "overlay 1 0\n", files: map[string]string{"/etc/modules-load.d/k8s.conf": "br_netfilter\noverlay # for containerd\n"}})
	if p.Changed() {
		t.Errorf("persistent already: %+v", p.Files)
	}
	// Other params set elsewhere: commented out there, the module's file written.
	p, _ = plan(t, Args{Name: "overlay", Params: "redirect_dir=on", Persistent: "present"}, node{lsmod: "overlay 1 0\n", files: map[string]string{
		"/etc/modules-load.d/overlay.conf": "overlay\n", "/etc/modprobe.d/old.conf": "options overlay metacopy=on\nblacklist nouveau\n"}})
	got := planned(p)
	if got["/etc/modprobe.d/old.conf"] != "#options overlay metacopy=on\nblacklist nouveau\n" || got["/etc/modprobe.d/overlay.conf"] != "options overlay redirect_dir=on\n" || len(got) != 2 {
		t.Errorf("params moved: %q", got)
	}
	// persistent absent comments out the module and its options.
	p, _ = plan(t, Args{Name: "nouveau", State: "absent", Persistent: "absent"}, node{files: map[string]string{
		"/etc/modules-load.d/gpu.conf": "nouveau\nnvidia\n", "/etc/modprobe.d/nouveau.conf": "options nouveau modeset=1\n"}})
	got = planned(p)
	if p.Commands != nil || got["/etc/modules-load.d/gpu.conf"] != "#nouveau\nnvidia\n" || got["/etc/modprobe.d/nouveau.conf"] != "#options nouveau modeset=1\n" {
		t.Errorf("persistent absent: %q %q", got, p.Commands)
	}
	if p.Vars["name"] != "nouveau" || p.Vars["state"] != "absent" {
		t.Errorf("vars: %v", p.Vars)
	}
}
