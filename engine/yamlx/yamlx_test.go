package yamlx

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

func TestSuggest(t *testing.T) {
	cands := []string{"hosts", "tasks", "handlers", "vars"}
	for _, tc := range []struct{ word, want string }{
		{"taks", "tasks"},  // deletion
		{"hsots", "hosts"}, // adjacent transposition counts as one edit
		{"handler", "handlers"},
		{"xyz", ""}, // too far from everything
		{"v", ""},   // one-letter words would match anything short
	} {
		if got := Suggest(tc.word, cands); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	if got := Suggest("x", nil); got != "" {
		t.Errorf("Suggest with no candidates = %q, want empty", got)
	}
}

func TestDidYouMean(t *testing.T) {
	if got, want := DidYouMean("becom", []string{"become", "when"}), " (did you mean become?)"; got != want {
		t.Errorf("DidYouMean = %q, want %q", got, want)
	}
	if got := DidYouMean("zzzzzz", []string{"become"}); got != "" {
		t.Errorf("DidYouMean with no close candidate = %q, want empty", got)
	}
}

func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`-o StrictHostKeyChecking=no  -p 22`, []string{"-o", "StrictHostKeyChecking=no", "-p", "22"}},
		{`msg="a b" n=1`, []string{"msg=a b", "n=1"}},
		{`'it"s' ""`, []string{`it"s`, ""}},
		{"a\tb\nc", []string{"a", "b", "c"}},
		{"   ", nil},
	} {
		if diff := cmp.Diff(tc.want, ShellWords(tc.in)); diff != "" {
			t.Errorf("ShellWords(%q) mismatch (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParseTabPosition(t *testing.T) {
	_, err := Parse([]byte("all:\n  hosts:\n\t  a:\n"))
	if err == nil {
		t.Fatal("Parse accepted a tab-indented document")
	}
	if err.Line != 3 || err.Col != 1 {
		t.Errorf("position = %d:%d, want 3:1 (the tab)", err.Line, err.Col)
	}
	if !strings.Contains(err.Msg, "a tab: YAML indentation must use spaces") {
		t.Errorf("Msg = %q, want the tab hint", err.Msg)
	}
	if strings.HasPrefix(err.Msg, "yaml:") {
		t.Errorf("Msg = %q still carries yaml.v3's prefix", err.Msg)
	}
}

func TestParseOK(t *testing.T) {
	doc, err := Parse([]byte("a: &x [1, 2]\nb: *x\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	m := doc.Content[0]
	if b := Deref(m.Content[3]); b == nil || b.Kind != yaml.SequenceNode {
		t.Errorf("Deref(alias) = %v, want the anchored list", b)
	}
	if got := KindName(m.Content[1]); got != "a list" {
		t.Errorf("KindName = %q, want %q", got, "a list")
	}
}

func TestDecodeValueNormalizesKeys(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("1: {2: x}\n"), &n); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	v, err := DecodeValue(n.Content[0])
	if err != nil {
		t.Fatalf("DecodeValue: %v", err)
	}
	want := map[string]any{"1": map[string]any{"2": "x"}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("DecodeValue mismatch (-want +got):\n%s", diff)
	}
}

// yaml.v3 names the line where the enclosing construct starts (its
// context mark); Parse reports where the problem is.
func TestParseProblemPosition(t *testing.T) {
	for _, tc := range []struct {
		doc       string
		line, col int
	}{
		// A list item under a mapping: yaml.v3 says line 1.
		{"all:\n  hosts:\n    a:\n      x: 1\n  - b\n", 5, 3},
		// A key indented off its siblings: yaml.v3 says line 2.
		{"all:\n  hosts:\n    a:\n      x: 1\n     y: 2\n", 5, 6},
		{"all:\n  children:\n    gpu:\n      hosts:\n        g1:\n       bad: 1\n", 6, 8},
		// yaml.v3's own line is right here.
		{"all:\n  hosts:\n    a:\n      x: 1\n    b c: d: e\n", 5, 10},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil {
			t.Fatalf("Parse accepted %q", tc.doc)
		}
		if err.Line != tc.line || err.Col != tc.col {
			t.Errorf("Parse(%q) at %d:%d (%s), want %d:%d", tc.doc, err.Line, err.Col, err.Msg, tc.line, tc.col)
		}
	}
}
