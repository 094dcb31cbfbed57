package safetext

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

func TestEscapes(t *testing.T) {
	for _, c := range []struct{ in, line, block string }{
		{"plain text, ünïcode, C:\\path", "plain text, ünïcode, C:\\path", "plain text, ünïcode, C:\\path"},
		{"# ops: \x00 do not edit \x1b]0;pwned\x07\x1b[2J\x1b[31m red", `# ops: \x00 do not edit \x1b]0;pwned\x07\x1b[2J\x1b[31m red`, `# ops: \x00 do not edit \x1b]0;pwned\x07\x1b[2J\x1b[31m red`},
		{"a\nb\tc\r\n", `a\nb\tc\r\n`, "a\nb\tc\\r\n"},
		{"del\x7f c1\u0085 bidi\u202egnp.exe zw\u200b ls\u2028 bom\ufeff alm\u061c", `del\x7f c1\u0085 bidi\u202egnp.exe zw\u200b ls\u2028 bom\ufeff alm\u061c`, `del\x7f c1\u0085 bidi\u202egnp.exe zw\u200b ls\u2028 bom\ufeff alm\u061c`},
		{"bad \xff\xc3 utf8", `bad \xff\xc3 utf8`, `bad \xff\xc3 utf8`},
	} {
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := Block(c.in); got != c.block {
			t.Errorf("Block(%q) = %q, want %q", c.in, got, c.block)
		}
	}
	if got := Name(""); got != `""` {
		t.Errorf(`Name("") = %q`, got)
	}
	for in, want := range map[string]string{" ": `" "`, " nuc1": `" nuc1"`, "a b": "a b", "x\t": `"x\t"`} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Indent("a\nok: [b]\n", "  "); got != "a\n  ok: [b]\n" {
		t.Errorf("Indent = %q", got)
	}
	var b bytes.Buffer
	if n, err := (Writer{W: &b}).Write([]byte("x\x1b[2Jy\n")); err != nil || n != 7 || b.String() != "x\\x1b[2Jy\n" {
		t.Errorf("Writer wrote %q (%d, %v)", b.String(), n, err)
	}
}

// FuzzLine: whatever the bytes, Line is one line of valid UTF-8 with no
// unsafe character, Block keeps only newlines and tabs of them, and text
// that needs no escaping is returned as it is.
func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "abc", "\x1b[31m", "a\nb", "\xff", "\u202e", "\\x1b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, b := Line(s), Block(s)
		if !utf8.ValidString(l) || !utf8.ValidString(b) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
		for _, r := range l {
			if Unsafe(r) {
				t.Fatalf("Line(%q) = %q keeps %q", s, l, r)
			}
		}
		for _, r := range b {
			if Unsafe(r) && r != '\n' && r != '\t' {
				t.Fatalf("Block(%q) = %q keeps %q", s, b, r)
			}
		}
		if Block(b) != b || Line(l) != l {
			t.Fatalf("escaping %q twice changes it", s)
		}
		if Clean(s) != (b == s) {
			t.Fatalf("Clean(%q) disagrees with Block", s)
		}
	})
}
