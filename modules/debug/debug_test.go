package debug

import (
	"context"
	"testing"
)

func check(t *testing.T, a *Args, vars map[string]any) (string, map[string]any, string) {
	t.Helper()
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	a.SetVars(vars)
	p, err := Module{}.Check(context.Background(), nil, a)
	if err != nil {
		t.Fatal(err)
	}
	return p.Msg, p.Vars, p.Skip
}

// TestDebug: msg (Hello world! by default), var (its value, or Ansible's
// words for an undefined one), verbosity against ansible_verbosity, and
// msg with var refused.
func TestDebug(t *testing.T) {
	if msg, vars, _ := check(t, &Args{}, nil); msg != "Hello world!" || vars["msg"] != "Hello world!" {
		t.Errorf("default: %q %v", msg, vars)
	}
	if msg, vars, _ := check(t, &Args{Var: "st.stat.mode"}, map[string]any{"st": map[string]any{"stat": map[string]any{"mode": "0644"}}}); msg != "st.stat.mode: 0644" || vars["st.stat.mode"] != "0644" {
		t.Errorf("var: %q %v", msg, vars)
	}
	if _, vars, _ := check(t, &Args{Var: "nope"}, map[string]any{}); vars["nope"] != "VARIABLE IS NOT DEFINED!" {
		t.Errorf("undefined var: %v", vars)
	}
	if _, _, skip := check(t, &Args{Msg: "x", Verbosity: 1}, map[string]any{"ansible_verbosity": 0}); skip != "Verbosity threshold not met." {
		t.Errorf("verbosity 1 at -v 0: skip %q", skip)
	}
	if _, _, skip := check(t, &Args{Msg: "x", Verbosity: 1}, map[string]any{"ansible_verbosity": 1}); skip != "" {
		t.Errorf("verbosity 1 at -v 1: skip %q", skip)
	}
	if msg, _, _ := check(t, &Args{Msg: []any{"a", 1}}, nil); msg != `["a",1]` {
		t.Errorf("list msg: %q", msg)
	}
	if err := (&Args{Msg: "x", Var: "y"}).Validate(); err == nil {
		t.Error("msg with var accepted")
	}
	if err := (&Args{Var: "a |"}).Validate(); err == nil {
		t.Error("a broken var expression accepted")
	}
}
