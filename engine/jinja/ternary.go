package jinja

import "strings"

// Jinja2's conditional expression (`X if C else Y`) anywhere in an
// expression. gonja parses it only as the whole of a {{ }} (and of a set),
// so `([a] if c else b) | list`, `f(x if c else y)` and a when: of the form
// `a if c else b` were refused. A source that gonja refuses is tried again
// with each conditional rewritten as `((C) and [X] or [Y])[0]`: the same
// value (a one-item list is always true, so `or` never reads Y when C
// holds), with the same laziness (gonja's and/or read their right side
// only when needed, as Python's do), so the branch not taken is never
// evaluated: `a.b if a is defined else 'x'` stays an error-free read.

// rewriteTemplate rewrites the conditional expressions inside each {{ }}
// of src; ok is false when there is none.
func rewriteTemplate(src string) (string, bool) {
	var b strings.Builder
	changed := false
	for {
		i := strings.Index(src, "{{")
		if i < 0 {
			b.WriteString(src)
			break
		}
		end := exprEnd(src, i+2)
		if end < 0 {
			b.WriteString(src)
			break
		}
		body := src[i+2 : end]
		out := rewriteExpr(body)
		changed = changed || out != body
		b.WriteString(src[:i+2])
		b.WriteString(out)
		src = src[end:]
	}
	return b.String(), changed
}

// exprEnd is the index of the "}}" that closes the {{ opened before from,
// past string literals; -1 when there is none.
func exprEnd(s string, from int) int {
	for i := from; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			i = stringEnd(s, i)
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				return i
			}
		}
	}
	return -1
}

// stringEnd is the index of the quote that closes the string literal
// opening at i (len(s)-1 when it is not closed).
func stringEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j
		}
	}
	return len(s) - 1
}

// rewriteExpr rewrites the conditional expressions of expression text e:
// those inside brackets first, then one at e's own level.
func rewriteExpr(e string) string {
	e = rewriteGroups(e)
	i := wordAt(e, "if", 0)
	if i < 0 {
		return e
	}
	j := wordAt(e, "else", i+2)
	if j < 0 {
		// Jinja's `X if C` without else is undefined when C is false:
		// left to gonja, which refuses it.
		return e
	}
	x := strings.TrimSpace(e[:i])
	c := strings.TrimSpace(e[i+2 : j])
	y := strings.TrimSpace(rewriteExpr(e[j+4:]))
	if x == "" || c == "" || y == "" {
		return e
	}
	return "((" + c + ") and [" + x + "] or [" + y + "])[0]"
}

// rewriteGroups rewrites each bracketed group of e: its items (between
// commas; a slice's or a dict's parts between colons; a keyword argument's
// value) each as an expression of its own.
func rewriteGroups(e string) string {
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		switch ch := e[i]; ch {
		case '\'', '"':
			j := stringEnd(e, i)
			b.WriteString(e[i : j+1])
			i = j
		case '(', '[', '{':
			j := closing(e, i)
			if j < 0 {
				b.WriteString(e[i:])
				return b.String()
			}
			b.WriteByte(ch)
			var parts []string
			for _, item := range splitTop(e[i+1:j], ',') {
				parts = append(parts, rewriteItem(item, ch))
			}
			b.WriteString(strings.Join(parts, ","))
			b.WriteByte(e[j])
			i = j
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// rewriteItem rewrites one item of a group opened by open.
func rewriteItem(item string, open byte) string {
	if open != '(' {
		pieces := splitTop(item, ':')
		for k, p := range pieces {
			pieces[k] = rewriteSpaced(p)
		}
		return strings.Join(pieces, ":")
	}
	if k := keywordEq(item); k >= 0 {
		return item[:k+1] + rewriteSpaced(item[k+1:])
	}
	return rewriteSpaced(item)
}

// rewriteSpaced is rewriteExpr keeping p's surrounding blanks.
func rewriteSpaced(p string) string {
	t := strings.TrimSpace(p)
	if t == "" {
		return p
	}
	lead := p[:strings.Index(p, t)]
	trail := p[len(lead)+len(t):]
	return lead + rewriteExpr(t) + trail
}

// closing is the index of the bracket that closes the one at i, or -1.
func closing(e string, i int) int {
	depth := 0
	for j := i; j < len(e); j++ {
		switch e[j] {
		case '\'', '"':
			j = stringEnd(e, j)
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// splitTop splits e at sep outside brackets and strings.
func splitTop(e string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(e); i++ {
		switch e[i] {
		case '\'', '"':
			i = stringEnd(e, i)
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case sep:
			if depth == 0 {
				out = append(out, e[start:i])
				start = i + 1
			}
		}
	}
	return append(out, e[start:])
}

// keywordEq is the index of a keyword argument's `=` (name=value) at the
// start of item, or -1.
func keywordEq(item string) int {
	t := strings.TrimLeft(item, " \t\n")
	off := len(item) - len(t)
	k := 0
	for k < len(t) && isWordByte(t[k]) {
		k++
	}
	if k == 0 {
		return -1
	}
	rest := strings.TrimLeft(t[k:], " \t\n")
	if strings.HasPrefix(rest, "=") && !strings.HasPrefix(rest, "==") {
		return off + k + (len(t[k:]) - len(rest))
	}
	return -1
}

// wordAt is the index of the keyword w in e at e's own level (outside
// brackets and strings) from from on, or -1.
func wordAt(e, w string, from int) int {
	depth := 0
	for i := 0; i < len(e); i++ {
		switch e[i] {
		case '\'', '"':
			i = stringEnd(e, i)
			continue
		case '(', '[', '{':
			depth++
			continue
		case ')', ']', '}':
			depth--
			continue
		}
		if i < from || depth != 0 || !strings.HasPrefix(e[i:], w) {
			continue
		}
		if (i == 0 || !isWordByte(e[i-1])) && (i+len(w) == len(e) || !isWordByte(e[i+len(w)])) {
			return i
		}
	}
	return -1
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.'
}
