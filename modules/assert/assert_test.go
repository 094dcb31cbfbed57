package assert

import (
	"context"
	"strings"
	"testing"

	"nodeconverge/modules/debug"
)

// TestAssert: every condition must hold; the first false one fails with
// fail_msg (or msg, or Ansible's default); an expression that cannot be
// evaluated fails naming it; success says success_msg unless quiet.
func TestAssert(t *testing.T) {
	vars := map[string]any{"n": 3, "name": "gpu1"}
	run := func(a *Args) (string, error) {
		t.Helper()
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
		a.SetVars(vars)
		p, err := Module{}.Check(context.Background(), nil, a)
		if err != nil {
			return "", err
		}
		return p.Msg, nil
	}
	if msg, err := run(&Args{That: debug.StringList{"n > 2", "name is match('gpu')"}}); err != nil || msg != "All assertions passed" {
		t.Errorf("passing: %q %v", msg, err)
	}
	if msg, err := run(&Args{That: debug.StringList{"n > 2"}, SuccessMsg: "ok", Quiet: true}); err != nil || msg != "" {
		t.Errorf("quiet: %q %v", msg, err)
	}
	if _, err := run(&Args{That: debug.StringList{"n > 2", "n > 5"}, FailMsg: "too few"}); err == nil || err.Error() != "too few" {
		t.Errorf("fail_msg: %v", err)
	}
	if _, err := run(&Args{That: debug.StringList{"n > 5"}, Msg: "alias"}); err == nil || err.Error() != "alias" {
		t.Errorf("msg: %v", err)
	}
	if _, err := run(&Args{That: debug.StringList{"n > 5"}}); err == nil || err.Error() != "Assertion failed" {
		t.Errorf("default: %v", err)
	}
	if _, err := run(&Args{That: debug.StringList{"missing.key == 1"}}); err == nil || !strings.Contains(err.Error(), "The conditional check 'missing.key == 1' failed") {
		t.Errorf("undefined: %v", err)
	}
	if err := (&Args{}).Validate(); err == nil {
		t.Error("no that accepted")
	}
}
