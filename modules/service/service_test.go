package service

import (
	"context"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

// fake answers the unit's query from canned state.
type fake struct {
	show  string
	files map[string]bool
	rc    int
}

func (f fake) Host() string { return "n1" }
func (f fake) Stage(context.Context, transport.StageRequest) ([]*transport.CmdResult, error) {
	return nil, nil
}
func (f fake) Query(_ context.Context, q transport.Query) (*transport.Snapshot, error) {
	s := &transport.Snapshot{Files: map[string]*transport.FileInfo{}}
	for _, p := range q.Files {
		s.Files[p] = &transport.FileInfo{Path: p, Exists: f.files[p]}
	}
	for range q.Cmds {
		s.Cmds = append(s.Cmds, &transport.CmdResult{Stdout: []byte(f.show), ExitCode: f.rc})
	}
	return s, nil
}

func show(load, active, ufs string) string {
	return "Id=demo.service\nLoadState=" + load + "\nActiveState=" + active + "\nSubState=x\nUnitFileState=" + ufs + "\n"
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// TestDecisions: Ansible's systemd module's table, case by case: which
// systemctl commands run, in which order, what is registered, and what is
// re-checked.
func TestDecisions(t *testing.T) {
	cases := []struct {
		name       string
		args       Args
		node       fake
		cmds       []string
		always     []string
		state      any
		enabled    any
		imperative bool
		err        string
	}{
		{"start stopped", Args{Name: "demo", State: "started"}, fake{show: show("loaded", "inactive", "disabled")}, []string{"systemctl start demo"}, nil, "started", nil, false, ""},
		{"started already", Args{Name: "demo", State: "started"}, fake{show: show("loaded", "active", "enabled")}, nil, nil, "started", nil, false, ""},
		{"stop running", Args{Name: "demo", State: "stopped"}, fake{show: show("loaded", "active", "enabled")}, []string{"systemctl stop demo"}, nil, "stopped", nil, false, ""},
		{"stop deactivating", Args{Name: "demo", State: "stopped"}, fake{show: show("loaded", "deactivating", "enabled")}, []string{"systemctl stop demo"}, nil, "stopped", nil, false, ""},
		{"restart running", Args{Name: "demo", State: "restarted"}, fake{show: show("loaded", "active", "enabled")}, []string{"systemctl restart demo"}, nil, "started", nil, true, ""},
		{"restart stopped starts", Args{Name: "demo", State: "restarted"}, fake{show: show("loaded", "inactive", "enabled")}, []string{"systemctl start demo"}, nil, "started", nil, true, ""},
		{"reload", Args{Name: "demo", State: "reloaded"}, fake{show: show("loaded", "active", "enabled")}, []string{"systemctl reload demo"}, nil, "started", nil, true, ""},
		{"enable", Args{Name: "demo", Enabled: yes()}, fake{show: show("loaded", "inactive", "disabled")}, []string{"systemctl enable demo"}, nil, nil, true, false, ""},
		{"enabled already", Args{Name: "demo", Enabled: yes()}, fake{show: show("loaded", "inactive", "enabled")}, nil, nil, nil, true, false, ""},
		{"static counts as enabled", Args{Name: "demo", Enabled: yes()}, fake{show: show("loaded", "inactive", "static")}, nil, nil, nil, true, false, ""},
		{"disable", Args{Name: "demo", Enabled: no()}, fake{show: show("loaded", "active", "enabled")}, []string{"systemctl disable demo"}, nil, nil, false, false, ""},
		{"mask then state", Args{Name: "demo", Masked: yes(), State: "stopped"}, fake{show: show("loaded", "active", "enabled")}, []string{"systemctl mask demo", "systemctl stop demo"}, nil, "stopped", nil, false, ""},
		{"unmask", Args{Name: "demo", Masked: no()}, fake{show: show("masked", "inactive", "masked")}, []string{"systemctl unmask demo"}, nil, nil, nil, false, ""},
		{"daemon-reload only", Args{DaemonReload: true}, fake{}, nil, []string{"systemctl daemon-reload"}, nil, nil, false, ""},
		{"reload then enable and start", Args{Name: "demo", DaemonReload: true, Enabled: yes(), State: "started"}, fake{show: show("loaded", "inactive", "disabled")},
			[]string{"systemctl enable demo", "systemctl start demo"}, []string{"systemctl daemon-reload"}, "started", true, false, ""},
		{"missing unit", Args{Name: "demo", State: "started"}, fake{show: show("not-found", "inactive", "")}, nil, nil, nil, nil, false, "Could not find the requested service demo"},
		{"unit an earlier task writes", Args{Name: "demo", State: "started", Enabled: yes()}, fake{show: show("not-found", "inactive", ""), files: map[string]bool{"/etc/systemd/system/demo.service": true}},
			[]string{"systemctl enable demo", "systemctl start demo"}, nil, "started", true, false, ""},
		{"no systemctl", Args{Name: "demo", State: "started"}, fake{rc: 127}, nil, nil, nil, nil, false, "drives systemd only"},
	}
	for _, c := range cases {
		a := c.args
		a.kind = "systemd"
		if err := a.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		plan, err := Module{kind: "systemd"}.Check(context.Background(), c.node, &a)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if strings.Join(plan.Commands, "; ") != strings.Join(c.cmds, "; ") || strings.Join(plan.Always, "; ") != strings.Join(c.always, "; ") {
			t.Errorf("%s: commands %q always %q, want %q %q", c.name, plan.Commands, plan.Always, c.cmds, c.always)
		}
		if plan.Vars["state"] != c.state || plan.Vars["enabled"] != c.enabled {
			t.Errorf("%s: registers state=%v enabled=%v, want %v %v", c.name, plan.Vars["state"], plan.Vars["enabled"], c.state, c.enabled)
		}
		if got := (Module{}).ImperativePlan(plan); got != c.imperative {
			t.Errorf("%s: imperative %v, want %v", c.name, got, c.imperative)
		}
		if plan.Changed() != (len(c.cmds) > 0) {
			t.Errorf("%s: changed %v", c.name, plan.Changed())
		}
	}
}

func TestArgs(t *testing.T) {
	for _, bad := range []Args{{kind: "service", Name: "x", DaemonReload: true}, {kind: "systemd", Name: "x*"}, {kind: "systemd", Name: "x", Scope: "user"},
		{kind: "systemd", State: "started"}, {kind: "systemd"}, {kind: "service", Name: "x", Use: "sysvinit"}, {kind: "systemd", Name: "x", State: "running"}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: want refused", bad)
		}
	}
	a := Args{kind: "systemd", Unit: "containerd", DaemonReload2: true}
	if err := a.Validate(); err != nil || a.Name != "containerd" || !a.DaemonReload {
		t.Errorf("aliases: %+v %v", a, err)
	}
	var _ module.Module = Module{}
}
