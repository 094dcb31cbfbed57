package jinja

import (
	"fmt"
	"testing"
)

// TestConditionalExpression: Jinja2's `X if C else Y` inside parentheses,
// lists, calls, filter arguments and as a whole condition gives Jinja2's
// value, and never evaluates the branch not taken (a strict undefined
// there is no error).
func TestConditionalExpression(t *testing.T) {
	vars := map[string]any{"a": "A", "b": []any{"B"}, "yes": true, "no": false, "n": 3, "d": map[string]any{"k": 1}}
	for _, c := range []struct{ src, want string }{
		{"([a] if yes else b) | list", "[A]"},
		{"([a] if no else b) | list", "[B]"},
		{"(a if missing is defined else 'x')", "x"},
		{"(missing.attr if missing is defined else 'safe')", "safe"},
		{"('' if yes else 'nonempty')", ""},
		{"(0 if yes else 1) + 10", "10"},
		{"a if no else 'y' if yes else 'z'", "y"},
		{"[a if yes else 'q', 'r']", "[A r]"},
		{"d.get('k' if yes else 'j')", "1"},
		{"(n | int if n is defined else 0) > 2", "true"},
		{"'if' ~ (' else' if yes else '')", "if else"},
		{"(a is defined) and (b | length > 0)", "true"},
	} {
		e, err := ParseExpr(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		v, err := e.Eval(vars)
		if err != nil {
			t.Errorf("%s: eval: %v", c.src, err)
			continue
		}
		if got := fmt.Sprint(v); got != c.want {
			t.Errorf("%s = %q, want %q", c.src, got, c.want)
		}
	}
	tpl, err := Parse("x={{ (a if yes else 'b') | lower }} {% if yes %}y{% else %}n{% endif %}")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tpl.Render(vars); err != nil || got != "x=a y" {
		t.Errorf("template: %q, %v", got, err)
	}
	if _, err := ParseExpr("(a if yes)"); err == nil {
		t.Error("a conditional without else parsed")
	}
}
