// Package safetext makes text that came from a node or an input (file
// content, command output, error text, host, group and variable values)
// safe to print on a terminal, in a log or in a text report.
//
// A node is not trusted to be polite: a comment in a config file can carry
// an escape sequence that retitles the operator's window or clears the
// screen of whoever reads the nightly log, and a newline in a name can start
// a line that reads like another host's status. So every byte that is not
// plain printable text is written as a visible escape (`\x1b`, `\x00`,
// `\u202e`), never dropped: the operator sees that something was there and
// what. Backslashes are left as they are, so ordinary text (Windows paths,
// TOML escapes) reads as written; JSON views keep the exact text (encoding/json
// escapes control characters itself), which is where exactness is needed.
//
// Line is for fields that must stay on one line (names, paths, a status
// line's message); Block keeps newlines and tabs (diffs, command output);
// Indent keeps newlines but starts every line after the first with a
// prefix, so multi-line text can never begin a line at column 0 where the
// output's own status and recap lines are.
package safetext

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Unsafe says whether r is not shown as itself: C0 controls, DEL, C1
// controls, and the invisible format characters that can make text lie
// (bidi overrides and isolates, the Arabic letter mark, zero-width
// characters, the line and paragraph separators, the byte order mark).
// It is the same set the HTML report shows as escapes (engine/report/html).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r >= 0x200b && r <= 0x200f, r == 0x2028, r == 0x2029,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0xfeff:
		return true
	}
	return false
}

// Line returns s with every unsafe character, newlines and tabs included,
// written as a visible escape: the result is one line of printable text.
func Line(s string) string { return escape(s, false) }

// Block returns s with every unsafe character except newline and tab
// written as a visible escape (a carriage return shows as `\r`).
func Block(s string) string { return escape(s, true) }

// Name is Line for names (hosts, groups, tasks, plays). An empty name, and
// one that starts or ends with a space, is shown in double quotes, so that a
// line never reads as if a field were missing and a recap line never starts
// with blanks (a reader that trims would see another host's line, or none).
func Name(s string) string {
	if s == "" || strings.TrimSpace(s) != s {
		return `"` + Line(s) + `"`
	}
	return Line(s)
}

// Indent is Block with every line after the first starting with prefix.
// A trailing newline is kept and not followed by prefix.
func Indent(s, prefix string) string {
	s = Block(s)
	trail := strings.HasSuffix(s, "\n")
	if trail {
		s = s[:len(s)-1]
	}
	s = strings.ReplaceAll(s, "\n", "\n"+prefix)
	if trail {
		s += "\n"
	}
	return s
}

// Clean says whether s needs no escaping as a Block (no unsafe character
// but newline and tab, and valid UTF-8).
func Clean(s string) bool { return Block(s) == s }

func escape(s string, block bool) string {
	i := firstUnsafe(s, block)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case block && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && Unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe is the index of the first byte that escape changes, or -1.
func firstUnsafe(s string, block bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if block && (c == '\n' || c == '\t') {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || Unsafe(r) {
			return i
		}
		i += size
	}
	return -1
}

// Writer passes everything written to W through Block, so no raw control
// byte reaches a terminal stream whoever wrote it. A Write is escaped on its
// own: callers write whole lines (a UTF-8 sequence split across two Writes
// would show as escaped bytes, never as raw ones).
type Writer struct {
	W io.Writer
}

// Write escapes p and writes it; it reports len(p) written when the
// escaped text was written whole.
func (w Writer) Write(p []byte) (int, error) {
	s := Block(string(p))
	if _, err := io.WriteString(w.W, s); err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	return len(p), nil
}
