package nvidiatoml

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// kind is what a statement of a TOML file is, as far as this package cares.
type kind uint8

const (
	kBlank       kind = iota // only whitespace
	kComment                 // '#' after optional whitespace
	kHeader                  // [a.b]
	kArrayHeader             // [[a.b]]
	kKeyVal                  // dotted.key = value, value possibly spanning lines
	kOther                   // anything else: kept verbatim, never changes the current table
)

// stmt is one statement: one or more whole lines of the source. Statements
// tile the source exactly, so concatenating src[start:end] of all of them
// gives the file back byte for byte.
//
// Fields are ordered and sized so that a statement costs 64 bytes: a file is
// one statement per line, and a file of comments must not cost many times
// its size to edit.
type stmt struct {
	start, end int // byte range; end is after the final '\n' (or len(src))
	valStart   int // kKeyVal: offset of the first byte of the value
	path       []string
	line       int32 // 1-based line number of the first line
	indent     int32 // bytes of leading blanks on the first line
	kind       kind
	open       bool // the value ran into EOF unterminated (""" / ''' / [ / {)
}

// parse splits src into statements. It never fails: lines it cannot read as
// TOML become kOther, so broken files (duplicated tables, stray text) are
// still handled line by line. Each statement is parsed from its first byte
// on without state carried over from earlier statements; deleting whole
// statements therefore never changes how the remaining ones parse, which is
// what makes Strip stable under repetition.
func parse(src []byte) []stmt {
	// One statement per line at most: sized once, never regrown.
	out := make([]stmt, 0, bytes.Count(src, []byte{'\n'})+1)
	pos, line := 0, int32(1)
	for pos < len(src) {
		s := stmt{start: pos, line: line}
		i := skipBlanks(src, pos)
		s.indent = int32(i - pos)
		eol := lineEnd(src, pos)
		switch {
		case restIsEmpty(src, i):
			s.kind, s.end = kBlank, eol
		case src[i] == '#':
			s.kind, s.end = kComment, eol
		case src[i] == '[':
			path, aot, _, ok := parseHeader(src, i)
			s.end = eol
			if ok {
				s.kind, s.path = kHeader, path
				if aot {
					s.kind = kArrayHeader
				}
			} else {
				s.kind = kOther
			}
		default:
			path, j, ok := parseKeyPath(src, i)
			if ok && j < len(src) && src[j] == '=' {
				j = skipBlanks(src, j+1)
				s.kind, s.path, s.valStart = kKeyVal, path, j
				s.end, s.open = scanValue(src, j)
			} else {
				s.kind, s.end = kOther, eol
			}
		}
		for k := s.start; k < s.end; k++ {
			if src[k] == '\n' {
				line++
			}
		}
		out = append(out, s)
		pos = s.end
	}
	return out
}

func skipBlanks(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
		i++
	}
	return i
}

// lineEnd returns the offset just after the '\n' ending the line holding i.
func lineEnd(src []byte, i int) int {
	for i < len(src) {
		if src[i] == '\n' {
			return i + 1
		}
		i++
	}
	return len(src)
}

// restIsEmpty reports whether the line from i on holds nothing but an
// optional '\r' before its newline (or EOF).
func restIsEmpty(src []byte, i int) bool {
	if i == len(src) || src[i] == '\n' {
		return true
	}
	return src[i] == '\r' && (i+1 == len(src) || src[i+1] == '\n')
}

// restIsTrailer reports whether the line from i on holds only blanks and an
// optional comment: what TOML allows after a header or a value.
func restIsTrailer(src []byte, i int) bool {
	i = skipBlanks(src, i)
	return restIsEmpty(src, i) || src[i] == '#'
}

// parseHeader reads `[a.b]` or `[[a.b]]` starting at the '[' at i, followed
// only by blanks and an optional comment; end is the offset after its last
// ']'.
func parseHeader(src []byte, i int) (path []string, aot bool, end int, ok bool) {
	i++
	if i < len(src) && src[i] == '[' {
		aot = true
		i++
	}
	path, i, ok = parseKeyPath(src, skipBlanks(src, i))
	if !ok || i >= len(src) || src[i] != ']' {
		return nil, false, 0, false
	}
	i++
	if aot {
		if i >= len(src) || src[i] != ']' {
			return nil, false, 0, false
		}
		i++
	}
	if !restIsTrailer(src, i) {
		return nil, false, 0, false
	}
	return path, aot, i, true
}

// parseKeyPath reads a dotted key (`a . "b.c" . 'd'`) starting at i and
// returns the decoded parts and the offset after the blanks that follow it.
func parseKeyPath(src []byte, i int) ([]string, int, bool) {
	var path []string
	for {
		k, j, ok := parseSimpleKey(src, i)
		if !ok {
			return nil, i, false
		}
		path = append(path, k)
		j = skipBlanks(src, j)
		if j < len(src) && src[j] == '.' {
			i = skipBlanks(src, j+1)
			continue
		}
		return path, j, true
	}
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// parseSimpleKey reads one bare, "basic" or 'literal' key at i.
func parseSimpleKey(src []byte, i int) (string, int, bool) {
	if i >= len(src) {
		return "", i, false
	}
	switch src[i] {
	case '\'':
		for j := i + 1; j < len(src); j++ {
			switch src[j] {
			case '\'':
				return string(src[i+1 : j]), j + 1, true
			case '\n':
				return "", i, false
			}
		}
		return "", i, false
	case '"':
		return parseBasicString(src, i)
	}
	j := i
	for j < len(src) && isBare(src[j]) {
		j++
	}
	if j == i {
		return "", i, false
	}
	return string(src[i:j]), j, true
}

// parseBasicString decodes a single-line "basic" string starting at the
// quote at i.
func parseBasicString(src []byte, i int) (string, int, bool) {
	var b []byte
	for j := i + 1; j < len(src); j++ {
		c := src[j]
		switch c {
		case '"':
			return string(b), j + 1, true
		case '\n':
			return "", i, false
		case '\\':
			if j+1 >= len(src) {
				return "", i, false
			}
			j++
			switch src[j] {
			case 'b':
				b = append(b, '\b')
			case 't':
				b = append(b, '\t')
			case 'n':
				b = append(b, '\n')
			case 'f':
				b = append(b, '\f')
			case 'r':
				b = append(b, '\r')
			case 'e':
				b = append(b, 0x1b)
			case '"', '\\':
				b = append(b, src[j])
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[src[j]]
				if j+n >= len(src) {
					return "", i, false
				}
				r, err := strconv.ParseUint(string(src[j+1:j+1+n]), 16, 32)
				if err != nil || !utf8.ValidRune(rune(r)) {
					return "", i, false
				}
				b = utf8.AppendRune(b, rune(r))
				j += n
			default:
				return "", i, false
			}
		default:
			b = append(b, c)
		}
	}
	return "", i, false
}

// scanValue finds where the value starting at i ends: at the first newline
// outside any string, array or inline table. It returns the offset after
// that newline, and open=true if EOF came first inside a multi-line
// construct. Inline tables are tracked across lines too (TOML 1.1 allows
// that), and brackets inside strings and comments do not count.
func scanValue(src []byte, i int) (end int, open bool) {
	depth := 0
	for i < len(src) {
		c := src[i]
		switch c {
		case '\n':
			if depth == 0 {
				return i + 1, false
			}
			i++
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case '"', '\'':
			if i+2 < len(src) && src[i+1] == c && src[i+2] == c {
				j, ok := scanMultiline(src, i+3, c)
				if !ok {
					return len(src), true
				}
				i = j
			} else {
				i = scanString(src, i+1, c)
			}
		case '[', '{':
			depth++
			i++
		case ']', '}':
			if depth > 0 {
				depth--
			}
			i++
		default:
			i++
		}
	}
	return len(src), depth > 0
}

// scanString skips a single-line string whose opening quote q was just
// before i. An unterminated one ends before the newline, as it cannot span
// lines.
func scanString(src []byte, i int, q byte) int {
	for i < len(src) {
		switch src[i] {
		case q:
			return i + 1
		case '\n':
			return i
		case '\\':
			if q == '"' && i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		}
		i++
	}
	return i
}

// scanMultiline skips a """ or ”' string whose opening delimiter ended just
// before i. TOML lets up to two quotes sit right before the closing three,
// so a run of 3 to 5 quotes closes the string.
func scanMultiline(src []byte, i int, q byte) (int, bool) {
	for i < len(src) {
		switch {
		case q == '"' && src[i] == '\\':
			i += 2
		case src[i] == q:
			n := 0
			for i+n < len(src) && src[i+n] == q {
				n++
			}
			if n >= 3 {
				return i + min(n, 5), true
			}
			i += n
		default:
			i++
		}
	}
	return len(src), false
}

// stringValue decodes the value of s if it is a single-line string.
func stringValue(src []byte, s stmt) (string, bool) {
	i := s.valStart
	if i >= len(src) {
		return "", false
	}
	var v string
	var j int
	switch src[i] {
	case '"':
		if i+2 < len(src) && src[i+1] == '"' && src[i+2] == '"' {
			return "", false
		}
		var ok bool
		if v, j, ok = parseBasicString(src, i); !ok {
			return "", false
		}
	case '\'':
		if i+2 < len(src) && src[i+1] == '\'' && src[i+2] == '\'' {
			return "", false
		}
		var ok bool
		if v, j, ok = parseSimpleKey(src, i); !ok {
			return "", false
		}
	default:
		return "", false
	}
	if !restIsTrailer(src, j) {
		return "", false
	}
	return v, true
}
