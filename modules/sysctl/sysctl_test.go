package sysctl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/lab/labtest"
	"nodeconverge/lab/labtest/labssh"
)

func inotifyArgs() *Args {
	a := Module{}.NewArgs().(*Args)
	a.Values = map[string]string{"fs.inotify.max_user_instances": "8192", "fs.inotify.max_user_watches": "1048576"}
	return a
}

func TestValidate(t *testing.T) {
	for name, mutate := range map[string]func(*Args){
		"relative path": func(a *Args) { a.Path = "99.conf" },
		"not .conf":     func(a *Args) { a.Path = "/etc/sysctl.d/99-inotify" },
		"no values":     func(a *Args) { a.Values = nil },
		"bad key":       func(a *Args) { a.Values = map[string]string{"a b": "1"} },
		"empty value":   func(a *Args) { a.Values = map[string]string{"fs.x": " "} },
	} {
		a := inotifyArgs()
		mutate(a)
		if err := a.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, a)
		}
	}
	if err := inotifyArgs().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestParseNormalises(t *testing.T) {
	got := parse("/f", []byte("# c\n; c\n\n  net/ipv4/ip_local_port_range =\t1024   65000 \n-fs.x=1\nnot a setting\n"))
	want := []setting{
		{File: "/f", Line: 4, Key: "net.ipv4.ip_local_port_range", Value: "1024 65000"},
		{File: "/f", Line: 5, Key: "fs.x", Value: "1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parse (-want +got):\n%s", diff)
	}
}

func snapshot(files map[string]string) *transport.Snapshot {
	s := &transport.Snapshot{Files: map[string]*transport.FileInfo{}, Globs: map[string][]string{}}
	for p, c := range files {
		s.Files[p] = &transport.FileInfo{Path: p, Exists: true, Content: []byte(c)}
		if p != SysctlConf {
			g := filepath.Dir(p) + "/*.conf"
			s.Globs[g] = append(s.Globs[g], p)
		}
	}
	return s
}

func TestFindShadows(t *testing.T) {
	want := map[string]string{"fs.inotify.max_user_instances": "8192"}
	own := DefaultPath
	snap := snapshot(map[string]string{
		"/usr/lib/sysctl.d/10-low.conf":  "fs.inotify.max_user_instances = 1\n", // before own: harmless
		"/etc/sysctl.d/zz-low.conf":      "# later\nfs.inotify.max_user_instances = 256\n",
		"/usr/lib/sysctl.d/zz-high.conf": "fs.inotify.max_user_instances = 65536\n", // higher: fine with minimum
		"/usr/lib/sysctl.d/zz-low.conf":  "fs.inotify.max_user_instances = 2\n",     // masked by /etc's zz-low.conf
		SysctlConf:                       "fs.inotify.max_user_instances=512\n",     // as 99-sysctl.conf, after 99-inotify.conf
	})
	got := findShadows(snap, own, want, true)
	wantS := []string{
		"/etc/sysctl.conf:1 sets fs.inotify.max_user_instances = 512, after /etc/sysctl.d/99-inotify.conf (wants 8192)",
		"/etc/sysctl.d/zz-low.conf:2 sets fs.inotify.max_user_instances = 256, after /etc/sysctl.d/99-inotify.conf (wants 8192)",
	}
	if diff := cmp.Diff(wantS, got); diff != "" {
		t.Errorf("shadows (-want +got):\n%s", diff)
	}
	// Without minimum a higher later value shadows too.
	if got := findShadows(snapshot(map[string]string{"/usr/lib/sysctl.d/zz-high.conf": "fs.inotify.max_user_instances = 65536\n"}), own, want, false); len(got) != 1 {
		t.Errorf("minimum false: shadows = %v, want the higher value reported", got)
	}
	// A file of the same name in an earlier directory masks own entirely.
	masked := findShadows(snapshot(map[string]string{"/etc/sysctl.d/50-x.conf": "a = 1\n"}), "/usr/lib/sysctl.d/50-x.conf", want, true)
	if len(masked) != 1 || !strings.Contains(masked[0], "masks /usr/lib/sysctl.d/50-x.conf") {
		t.Errorf("masked own file: %v", masked)
	}
}

// labHost starts a one-node lab and connects to its node over SSH.
func labHost(t *testing.T, o labtest.Options) (*labtest.Lab, labtest.Node, *node.Host) {
	t.Helper()
	l := labtest.Start(t, o)
	n := l.Nodes[0]
	return l, n, node.NewHost(labssh.Dial(t, l, n), node.HostOptions{})
}

func TestLabSysctl(t *testing.T) {
	ctx := context.Background()
	l, n, h := labHost(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	proc := l.NodePath(n.Name, "/proc/sys/fs/inotify/max_user_instances")
	watches := strings.TrimSpace(l.Exec(t, n.Name, "cat", "/proc/sys/fs/inotify/max_user_watches"))
	m := Module{}
	a := inotifyArgs()
	// The lab node's watches limit is the machine's; ask for it plus one so
	// both keys drift.
	a.Values["fs.inotify.max_user_watches"] = watches + "1"
	plan, err := m.Check(ctx, transport.ReadOnly(h), a)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Changed() || len(plan.Files) != 1 || plan.Files[0].Action != module.Create || plan.Files[0].Path != DefaultPath {
		t.Fatalf("plan files = %+v", plan.Files)
	}
	wantFile := "# Managed by nodeconverge (module sysctl); the whole file is rewritten.\n" +
		"fs.inotify.max_user_instances = 8192\nfs.inotify.max_user_watches = " + watches + "1\n"
	if string(plan.Files[0].After) != wantFile {
		t.Errorf("planned file:\n%s\nwant:\n%s", plan.Files[0].After, wantFile)
	}
	wantEff := []module.EffectiveChange{
		{Key: "live:fs.inotify.max_user_instances", Before: "128", After: "8192"},
		{Key: "live:fs.inotify.max_user_watches", Before: watches, After: watches + "1"},
	}
	if diff := cmp.Diff(wantEff, plan.Effective); diff != "" {
		t.Errorf("live drift (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"sysctl -p " + DefaultPath}, plan.Commands); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	res, err := m.Apply(ctx, h, plan)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Msg, "fs.inotify.max_user_instances=8192") {
		t.Errorf("apply msg = %q, want the read-back value", res.Msg)
	}
	if b, err := os.ReadFile(proc); err != nil || strings.TrimSpace(string(b)) != "8192" {
		t.Errorf("node's max_user_instances = %q, %v; want 8192", b, err)
	}
	if b, err := os.ReadFile(l.NodePath(n.Name, DefaultPath)); err != nil || string(b) != wantFile {
		t.Errorf("node's %s = %q, %v", DefaultPath, b, err)
	}
	again, err := m.Check(ctx, transport.ReadOnly(h), a)
	if err != nil || again.Changed() || len(again.Effective) != 0 {
		t.Fatalf("second check = %+v, %v; want nothing to do", again, err)
	}

	// Reformatting the file is not drift; a live value above the wanted
	// one is in sync (minimum), and lowering it is never planned.
	if err := os.WriteFile(l.NodePath(n.Name, DefaultPath), []byte("fs.inotify.max_user_watches\t=  "+watches+"1\nfs.inotify.max_user_instances=8192\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(proc, []byte("65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Refresh() // the files changed behind this run's back
	if again, err = m.Check(ctx, transport.ReadOnly(h), a); err != nil || again.Changed() {
		t.Fatalf("check after reformat and higher live value = %+v, %v; want nothing", again, err)
	}

	// A later file lowering the limit would win at boot.
	if err := os.WriteFile(l.NodePath(n.Name, "/etc/sysctl.d/zz-low.conf"), []byte("# lowers it\nfs.inotify.max_user_instances = 256\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Refresh()
	_, err = m.Check(ctx, transport.ReadOnly(h), a)
	var ve *module.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "/etc/sysctl.d/zz-low.conf:2 sets fs.inotify.max_user_instances = 256") {
		t.Fatalf("check with a lowering later file: err = %v", err)
	}
	a.AllowShadow = true
	plan, err = m.Check(ctx, transport.ReadOnly(h), a)
	if err != nil || plan.Changed() || len(plan.Notes) != 1 || !strings.Contains(plan.Notes[0], "zz-low.conf:2") {
		t.Fatalf("allow_shadow: plan %+v, err %v", plan, err)
	}
}

// TestLabSysctlRollback (issue 11 item 9): rolling back a run that set a
// live value restores the value from before the run, not only the file.
func TestLabSysctlRollback(t *testing.T) {
	ctx := context.Background()
	l, n, h := labHost(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	proc := l.NodePath(n.Name, "/proc/sys/fs/inotify/max_user_instances")
	watches := l.NodePath(n.Name, "/proc/sys/fs/inotify/max_user_watches")
	watchesBefore, err := os.ReadFile(watches)
	if err != nil {
		t.Fatal(err)
	}
	m := Module{}
	plan, err := m.Check(ctx, transport.ReadOnly(h), inotifyArgs())
	if err != nil {
		t.Fatal(err)
	}
	// Undone newest first: the live values (kept after the file is
	// written, in key order), then the file.
	var want []string
	for i := len(plan.Effective) - 1; i >= 0; i-- {
		want = append(want, procPath(strings.TrimPrefix(plan.Effective[i].Key, "live:")))
	}
	want = append(want, DefaultPath)
	if _, err := m.Apply(ctx, h, plan); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(proc); err != nil || strings.TrimSpace(string(b)) != "8192" {
		t.Fatalf("after apply, max_user_instances = %q, %v; want 8192", b, err)
	}
	paths, err := h.Rollback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(proc); err != nil || strings.TrimSpace(string(b)) != "128" {
		t.Errorf("after rollback, max_user_instances = %q, %v; want 128, the value before the run", b, err)
	}
	if _, err := os.Stat(l.NodePath(n.Name, DefaultPath)); !os.IsNotExist(err) {
		t.Errorf("after rollback, %s: %v; want it gone", DefaultPath, err)
	}
	if b, err := os.ReadFile(watches); err != nil || string(b) != string(watchesBefore) {
		t.Errorf("after rollback, max_user_watches = %q, %v; want %q", b, err, watchesBefore)
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("rolled back paths (-want +got):\n%s", diff)
	}
}

// TestAnsibleForm: ansible.posix.sysctl's arguments map onto the module:
// one key of sysctl_file (default /etc/sysctl.conf), set exactly, live
// unless reload and sysctl_set are both false; what does not map is
// refused saying why.
func TestAnsibleForm(t *testing.T) {
	f := false
	yes := true
	for name, tc := range map[string]struct {
		a    Args
		want Args
	}{
		"defaults": {Args{Name: "net.ipv4.ip_forward", Value: "1"},
			Args{Path: AnsibleDefaultFile, Values: map[string]string{"net.ipv4.ip_forward": "1"}, ApplyLive: true, KeyOnly: true}},
		"file, no reload": {Args{Name: "vm.swappiness", Value: "10", SysctlFile: "/etc/sysctl.d/99-k8s.conf", Reload: &f, State: "present"},
			Args{Path: "/etc/sysctl.d/99-k8s.conf", Values: map[string]string{"vm.swappiness": "10"}, KeyOnly: true}},
		"sysctl_set": {Args{Name: "vm.swappiness", Value: "10", Reload: &f, SysctlSet: &yes},
			Args{Path: AnsibleDefaultFile, Values: map[string]string{"vm.swappiness": "10"}, ApplyLive: true, KeyOnly: true}},
	} {
		a := Module{}.NewArgs().(*Args)
		a.Name, a.Value, a.SysctlFile, a.Reload, a.SysctlSet, a.State = tc.a.Name, tc.a.Value, tc.a.SysctlFile, tc.a.Reload, tc.a.SysctlSet, tc.a.State
		if err := a.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if diff := cmp.Diff(&tc.want, a); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	for name, tc := range map[string]struct {
		mutate func(*Args)
		want   string
	}{
		"absent":       {func(a *Args) { a.Name, a.State = "vm.x", "absent" }, "state: absent is not supported"},
		"ignoreerrors": {func(a *Args) { a.Name, a.Value, a.IgnoreErrors = "vm.x", "1", true }, "ignoreerrors is not supported"},
		"no name":      {func(a *Args) { a.Value = "1" }, "name is required"},
		"both forms":   {func(a *Args) { a.Name, a.Value, a.Values = "vm.x", "1", map[string]string{"vm.y": "2"} }, "not both"},
		"no value":     {func(a *Args) { a.Name = "vm.x" }, "value is required"},
	} {
		a := Module{}.NewArgs().(*Args)
		tc.mutate(a)
		if err := a.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", name, err, tc.want)
		}
	}
}

// TestSetKeys: in the Ansible form the file is shared and rewritten as
// ansible.posix.sysctl rewrites it: lines stripped, "key=value", the
// first line of a key kept, the wanted value set, a missing key added.
func TestSetKeys(t *testing.T) {
	old := "# kube\n  net.ipv4.ip_forward=0\nvm.swappiness = 60\n; note\nnet.ipv4.ip_forward = 0\nnot a setting\n"
	got := string(setKeys([]byte(old), map[string]string{"net.ipv4.ip_forward": "1", "fs.file-max": "100"}))
	want := "# kube\nnet.ipv4.ip_forward=1\nvm.swappiness=60\n; note\nnot a setting\nfs.file-max=100\n"
	if got != want {
		t.Errorf("setKeys:\n got %q\nwant %q", got, want)
	}
	if got := string(setKeys(nil, map[string]string{"a.b": "1"})); got != "a.b=1\n" {
		t.Errorf("setKeys on a new file = %q", got)
	}
}

// TestLabSysctlAnsibleForm: ansible.posix.sysctl's form on a lab node:
// the key's line of a shared file gets the value and the file is
// rewritten as Ansible rewrites it (the operator's other settings stay,
// as key=value), the live value is set exactly, and a second check plans
// nothing.
func TestLabSysctlAnsibleForm(t *testing.T) {
	ctx := context.Background()
	l, n, h := labHost(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	file := "/etc/sysctl.d/90-shared.conf"
	if err := os.WriteFile(l.NodePath(n.Name, file), []byte("# operator's\nfs.inotify.max_user_instances = 64\nvm.operator = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := Module{}
	a := m.NewArgs().(*Args)
	a.Name, a.Value, a.SysctlFile = "fs.inotify.max_user_instances", "512", file
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	plan, err := m.Check(ctx, transport.ReadOnly(h), a)
	if err != nil {
		t.Fatal(err)
	}
	want := "# operator's\nfs.inotify.max_user_instances=512\nvm.operator=1\n"
	if len(plan.Files) != 1 || string(plan.Files[0].After) != want {
		t.Fatalf("planned file: %+v", plan.Files)
	}
	if _, err := m.Apply(ctx, h, plan); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(l.NodePath(n.Name, file)); string(b) != want {
		t.Errorf("file = %q, want %q", b, want)
	}
	if b, _ := os.ReadFile(l.NodePath(n.Name, "/proc/sys/fs/inotify/max_user_instances")); strings.TrimSpace(string(b)) != "512" {
		t.Errorf("live = %q, want 512", b)
	}
	again, err := m.Check(ctx, transport.ReadOnly(h), a)
	if err != nil || again.Changed() {
		t.Fatalf("second check = %+v, %v; want nothing to do", again, err)
	}
}
