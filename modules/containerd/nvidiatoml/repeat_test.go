package nvidiatoml

import "testing"

func TestRepeatedTable(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      Repeat
		ok        bool
	}{
		{"pasted twice", "[a]\nx = 1\n[a.b]\ny = 2\n[a]\nx = 1\n", Repeat{"[a]", 1, 5}, true},
		{"indented, commented, CRLF", "  [p.\"cri\".r]   # one\r\nx = 1\r\n\t[p.\"cri\".r]\r\n", Repeat{`[p."cri".r]`, 1, 3}, true},
		{"arrays of tables repeat", "[[a]]\nx = 1\n[[a]]\nx = 2\n", Repeat{}, false},
		// Decoders disagree on these, so they are not decided by text.
		{"quoted differently", "[x.\"k\"]\n[x.'k']\n", Repeat{}, false},
		{"spaced differently", "[a.b]\n[ a.b ]\n", Repeat{}, false},
		{"dotted then table", "a.b = 1\n[a]\n", Repeat{}, false},
		// A header inside a multi-line string is text, not a header.
		{"in a string", "[a]\ns = \"\"\"\n[a]\n\"\"\"\n", Repeat{}, false},
		{"in an array", "[a]\nv = [\n[a]\n]\n", Repeat{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := RepeatedTable([]byte(c.src))
			if ok != c.ok || got != c.want {
				t.Errorf("RepeatedTable = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}
