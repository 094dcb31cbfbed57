package inventory

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// errPySet marks a Python set literal, which Ansible accepts in an INI
// value but cannot show (`ansible-inventory --list` fails on it).
var errPySet = errors.New("a Python set literal ({a, b}) is not supported as an INI value: write a list [a, b]")

// pyLiteral evaluates an INI value as Ansible's INI plugin does: Python's
// ast.literal_eval, falling back to the text itself when the text is not a
// Python literal. Numbers, strings (quoted, with escapes, adjacent ones
// joined), True/False/None, lists, tuples (as lists) and dicts are
// literals; "yes", "true", 01 or hello world stay text. The error is for
// the one literal nodeconverge refuses (a set).
func pyLiteral(s string) (any, error) {
	p := &pyParser{s: strings.TrimLeft(s, " \t")}
	v, err := p.value(0)
	if err == nil {
		p.space(false)
		if p.i < len(p.s) {
			err = errSyntax
		}
	}
	if errors.Is(err, errPySet) {
		return nil, err
	}
	if err != nil {
		return s, nil
	}
	return v, nil
}

var errSyntax = errors.New("not a Python literal")

type pyParser struct {
	s string
	i int
}

const maxPyDepth = 100

// space skips blanks and a comment; newlines only inside brackets.
func (p *pyParser) space(nested bool) {
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == ' ' || c == '\t' || c == '\f':
			p.i++
		case (c == '\n' || c == '\r') && nested:
			p.i++
		case c == '\\' && p.i+1 < len(p.s) && p.s[p.i+1] == '\n':
			p.i += 2
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
			if !nested {
				// A trailing newline after the comment ends the value.
				for p.i < len(p.s) && (p.s[p.i] == '\n' || p.s[p.i] == '\r') {
					p.i++
				}
			}
		case (c == '\n' || c == '\r') && !nested:
			// Trailing newlines end the expression; anything after
			// them is a syntax error, which the caller sees as text
			// left over.
			j := p.i
			for j < len(p.s) && strings.IndexByte(" \t\r\n\f", p.s[j]) >= 0 {
				j++
			}
			if j == len(p.s) {
				p.i = j
			}
			return
		default:
			return
		}
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func (p *pyParser) value(depth int) (any, error) {
	if depth > maxPyDepth {
		return nil, errSyntax
	}
	nested := depth > 0
	p.space(nested)
	if p.i >= len(p.s) {
		return nil, errSyntax
	}
	c := p.s[p.i]
	switch {
	case c == '+' || c == '-':
		p.i++
		p.space(nested)
		v, err := p.number()
		if err != nil {
			return nil, err
		}
		if c == '-' {
			switch n := v.(type) {
			case int:
				return -n, nil
			case float64:
				return -n, nil
			}
		}
		return v, nil
	case c == '[':
		p.i++
		return p.sequence(']', depth)
	case c == '(':
		p.i++
		p.space(true)
		if p.i < len(p.s) && p.s[p.i] == ')' {
			p.i++
			return []any{}, nil
		}
		first, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.space(true)
		if p.i < len(p.s) && p.s[p.i] == ')' {
			p.i++
			return first, nil
		}
		if p.i >= len(p.s) || p.s[p.i] != ',' {
			return nil, errSyntax
		}
		p.i++
		rest, err := p.sequence(')', depth)
		if err != nil {
			return nil, err
		}
		return append([]any{first}, rest...), nil
	case c == '{':
		p.i++
		return p.dict(depth)
	case c == '\'' || c == '"':
		return p.strings()
	case c >= '0' && c <= '9' || c == '.' && p.i+1 < len(p.s) && p.s[p.i+1] >= '0' && p.s[p.i+1] <= '9':
		return p.number()
	case isIdentByte(c):
		j := p.i
		for j < len(p.s) && isIdentByte(p.s[j]) {
			j++
		}
		word := p.s[p.i:j]
		if j < len(p.s) && (p.s[j] == '\'' || p.s[j] == '"') {
			return p.strings()
		}
		p.i = j
		switch word {
		case "True":
			return true, nil
		case "False":
			return false, nil
		case "None":
			return nil, nil
		}
	}
	return nil, errSyntax
}

// sequence reads "a, b, ]" after the opening bracket.
func (p *pyParser) sequence(end byte, depth int) ([]any, error) {
	out := []any{}
	for {
		p.space(true)
		if p.i < len(p.s) && p.s[p.i] == end {
			p.i++
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		done, err := p.next(end)
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
}

// next reads what follows an item of a sequence or dict: "," (more may
// follow) or the closing bracket end (done).
func (p *pyParser) next(end byte) (done bool, err error) {
	p.space(true)
	if p.i >= len(p.s) {
		return false, errSyntax
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		return false, nil
	case end:
		p.i++
		return true, nil
	}
	return false, errSyntax
}

// dict reads "k: v, ...}" after "{"; "{a, b}" is a set.
func (p *pyParser) dict(depth int) (any, error) {
	out := map[string]any{}
	first := true
	for {
		p.space(true)
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return out, nil
		}
		k, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.space(true)
		if p.i >= len(p.s) {
			return nil, errSyntax
		}
		if p.s[p.i] != ':' {
			if first && (p.s[p.i] == ',' || p.s[p.i] == '}') {
				if p.s[p.i] == ',' {
					p.i++
					if _, err := p.sequence('}', depth); err != nil {
						return nil, err
					}
				} else {
					p.i++
				}
				return nil, errPySet
			}
			return nil, errSyntax
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		key, ok := pyJSONKey(k)
		if !ok {
			return nil, errSyntax
		}
		out[key] = v
		first = false
		done, err := p.next('}')
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
}

// pyJSONKey is the key Python's json module writes for a dict key.
func pyJSONKey(k any) (string, bool) {
	switch t := k.(type) {
	case string:
		return t, true
	case int:
		return strconv.Itoa(t), true
	case float64:
		return pyFloatRepr(t), true
	case bool:
		return strconv.FormatBool(t), true
	case nil:
		return "null", true
	}
	return "", false
}

func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eIN") {
		s += ".0"
	}
	return s
}

const digitPart = `[0-9](?:_?[0-9])*`

var (
	pyFloatRe = regexp.MustCompile(`^(?:(?:(?:` + digitPart + `)?\.` + digitPart + `|` + digitPart + `\.?)[eE][+-]?` + digitPart +
		`|(?:` + digitPart + `)?\.` + digitPart + `|` + digitPart + `\.)`)
	pyIntRe = regexp.MustCompile(`^(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|[1-9](?:_?[0-9])*|0+(?:_?0)*)`)
)

func (p *pyParser) number() (any, error) {
	rest := p.s[p.i:]
	f := pyFloatRe.FindString(rest)
	n := pyIntRe.FindString(rest)
	var v any
	switch {
	case len(f) > len(n):
		x, err := strconv.ParseFloat(strings.ReplaceAll(f, "_", ""), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, errSyntax
		}
		p.i += len(f)
		v = x
	case n != "":
		clean := strings.ReplaceAll(n, "_", "")
		base := 10
		if len(clean) > 1 && clean[0] == '0' {
			switch clean[1] {
			case 'x', 'X':
				base, clean = 16, clean[2:]
			case 'o', 'O':
				base, clean = 8, clean[2:]
			case 'b', 'B':
				base, clean = 2, clean[2:]
			}
		}
		x, err := strconv.ParseInt(clean, base, 64)
		if err != nil {
			// Python's integers have no bound; such a value stays
			// text rather than turning into a different number.
			return nil, errSyntax
		}
		p.i += len(n)
		v = int(x)
	default:
		return nil, errSyntax
	}
	// "1abc", "1j" (complex) or "1.2.3" is not a literal nodeconverge
	// reads.
	if p.i < len(p.s) && (isIdentByte(p.s[p.i]) || p.s[p.i] == '.') {
		return nil, errSyntax
	}
	return v, nil
}

// strings reads one or more adjacent string literals and joins them.
func (p *pyParser) strings() (any, error) {
	var b strings.Builder
	kind := -1 // 0 text, 1 bytes
	for {
		j := p.i
		for j < len(p.s) && isIdentByte(p.s[j]) {
			j++
		}
		if j >= len(p.s) || (p.s[j] != '\'' && p.s[j] != '"') {
			if kind < 0 {
				return nil, errSyntax
			}
			break
		}
		// Python 3's string prefixes; f-strings are not literals.
		prefix := strings.ToLower(p.s[p.i:j])
		switch prefix {
		case "", "r", "u", "b", "br", "rb":
		default:
			return nil, errSyntax
		}
		raw, isBytes := strings.Contains(prefix, "r"), strings.Contains(prefix, "b")
		k := 0
		if isBytes {
			k = 1
		}
		if kind >= 0 && kind != k {
			return nil, errSyntax
		}
		kind = k
		p.i = j
		s, err := p.quoted(raw, isBytes)
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
		save := p.i
		p.space(false)
		if p.i >= len(p.s) {
			break
		}
		if c := p.s[p.i]; c != '\'' && c != '"' && !isIdentByte(c) {
			p.i = save
			break
		}
	}
	return b.String(), nil
}

// quoted reads one quoted literal at p.i (the opening quote).
func (p *pyParser) quoted(raw, isBytes bool) (string, error) {
	q := p.s[p.i]
	triple := strings.HasPrefix(p.s[p.i:], strings.Repeat(string(q), 3))
	if triple {
		p.i += 3
	} else {
		p.i++
	}
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", errSyntax
		}
		c := p.s[p.i]
		if c == q && (!triple || strings.HasPrefix(p.s[p.i:], strings.Repeat(string(q), 3))) {
			if triple {
				p.i += 3
			} else {
				p.i++
			}
			return b.String(), nil
		}
		if c == '\n' && !triple {
			return "", errSyntax
		}
		if isBytes && c >= 0x80 {
			return "", errSyntax
		}
		if c != '\\' {
			b.WriteByte(c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", errSyntax
		}
		e := p.s[p.i+1]
		if raw {
			b.WriteByte('\\')
			b.WriteByte(e)
			p.i += 2
			continue
		}
		p.i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := int(e - '0')
			for k := 0; k < 2 && p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '7'; k++ {
				n = n*8 + int(p.s[p.i]-'0')
				p.i++
			}
			if isBytes {
				b.WriteByte(byte(n))
			} else {
				b.WriteRune(rune(n))
			}
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if isBytes && e != 'x' {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			if p.i+width > len(p.s) {
				return "", errSyntax
			}
			n, err := strconv.ParseUint(p.s[p.i:p.i+width], 16, 32)
			if err != nil || strings.ContainsAny(p.s[p.i:p.i+width], "+-_") {
				return "", errSyntax
			}
			p.i += width
			switch {
			case isBytes:
				b.WriteByte(byte(n))
			case n > utf8.MaxRune:
				return "", errSyntax
			default:
				b.WriteRune(rune(n))
			}
		case 'N':
			// Named escapes need Python's Unicode name table.
			return "", errSyntax
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
}

// shlexSplit splits a host line as Python's shlex.split(line,
// comments=True) does (POSIX mode): quotes group and are removed,
// a backslash escapes outside single quotes, and "#" starts a comment
// even inside a word.
func shlexSplit(s string) ([]string, error) {
	const (
		stSpace = iota
		stWord
		stSingle
		stDouble
		stEscape
	)
	var out []string
	var tok strings.Builder
	quoted := false
	state, escFrom := stSpace, stWord
	emit := func() {
		if tok.Len() > 0 || quoted {
			out = append(out, tok.String())
		}
		tok.Reset()
		quoted = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch state {
		case stSpace, stWord:
			switch {
			case c == ' ' || c == '\t' || c == '\r' || c == '\n':
				emit()
				state = stSpace
			case c == '#':
				for i < len(s) && s[i] != '\n' {
					i++
				}
				emit()
				state = stSpace
			case c == '\'':
				quoted, state = true, stSingle
			case c == '"':
				quoted, state = true, stDouble
			case c == '\\':
				escFrom, state = stWord, stEscape
			default:
				tok.WriteByte(c)
				state = stWord
			}
		case stSingle:
			if c == '\'' {
				state = stWord
			} else {
				tok.WriteByte(c)
			}
		case stDouble:
			switch c {
			case '"':
				state = stWord
			case '\\':
				escFrom, state = stDouble, stEscape
			default:
				tok.WriteByte(c)
			}
		case stEscape:
			if escFrom == stDouble && c != '\\' && c != '"' {
				tok.WriteByte('\\')
			}
			tok.WriteByte(c)
			state = escFrom
		}
	}
	switch state {
	case stSingle, stDouble:
		return nil, fmt.Errorf("no closing quotation")
	case stEscape:
		return nil, fmt.Errorf("no escaped character")
	}
	emit()
	return out, nil
}
