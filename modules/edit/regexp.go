package edit

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Regexp compiles a pattern written for Python's `re`, as Ansible's
// modules get it. The syntax both share (classes, groups, (?P<name>),
// inline flags, \d \w \s \b \A) means the same in Go's RE2; Python's \Z is
// RE2's \z. What RE2 cannot run (look-ahead and look-behind, back-references
// inside the pattern, conditionals) is refused with the reason, never
// guessed: RE2 has no backtracking, which is also why a pattern here can
// never take exponential time on a file.
func Regexp(what, pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			n := pattern[i+1]
			switch {
			case n == 'Z' && !inClass:
				b.WriteString(`\z`)
			case n >= '1' && n <= '9' && !inClass:
				return nil, fmt.Errorf("%s %q: back-reference \\%c inside a pattern is not supported (Go's RE2 has none); match without it", what, pattern, n)
			default:
				b.WriteByte(c)
				b.WriteByte(n)
			}
			i++
			continue
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			// A ] right after [ or [^ is a literal.
			if i+1 < len(pattern) && pattern[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(pattern) && pattern[i+1] == ']' {
				b.WriteString(`\]`)
				i++
			}
			continue
		case c == ']' && inClass:
			inClass = false
		case c == '(' && !inClass && i+2 < len(pattern) && pattern[i+1] == '?':
			rest := pattern[i+2:]
			switch {
			case strings.HasPrefix(rest, "="), strings.HasPrefix(rest, "!"):
				return nil, fmt.Errorf("%s %q: look-ahead (?%c...) is not supported (Go's RE2 has none); match without it", what, pattern, rest[0])
			case strings.HasPrefix(rest, "<="), strings.HasPrefix(rest, "<!"):
				return nil, fmt.Errorf("%s %q: look-behind (?%s...) is not supported (Go's RE2 has none); match without it", what, pattern, rest[:2])
			case strings.HasPrefix(rest, "P="):
				return nil, fmt.Errorf("%s %q: back-reference (?P=...) is not supported (Go's RE2 has none); match without it", what, pattern)
			case strings.HasPrefix(rest, "("):
				return nil, fmt.Errorf("%s %q: conditional group (?(...)...) is not supported (Go's RE2 has none)", what, pattern)
			case strings.HasPrefix(rest, "#"):
				// A Python comment group: dropped.
				end := strings.IndexByte(rest, ')')
				if end < 0 {
					return nil, fmt.Errorf("%s %q: missing ), unterminated comment", what, pattern)
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte(c)
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("%s %q: %v", what, pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// Multiline says whether a pattern sets Python's MULTILINE flag inline
// ((?m) at its start), which blockinfile's insertafter/insertbefore read
// as "search the whole file" rather than line by line.
func Multiline(pattern string) bool {
	if !strings.HasPrefix(pattern, "(?") {
		return false
	}
	end := strings.IndexAny(pattern[2:], ":)")
	return end >= 0 && pattern[2+end] == ')' && strings.ContainsRune(pattern[2:2+end], 'm')
}

// Expand fills a Python replacement template (Ansible's lineinfile line
// with backrefs, replace's replace) from a match of re in src: \1 to \99
// and \g<N> or \g<name> are groups (an unmatched group is empty, as in
// Python 3.5+), \n \t \r \f \v \a \b \\ are escapes, and a backslash
// before anything but an ASCII letter stays as written. Python refuses an
// unknown letter escape and so does Expand.
func Expand(re *regexp.Regexp, template string, src []byte, m []int) ([]byte, error) {
	var out []byte
	group := func(n int) []byte {
		if 2*n+1 >= len(m) || m[2*n] < 0 {
			return nil
		}
		return src[m[2*n]:m[2*n+1]]
	}
	groups := re.NumSubexp()
	for i := 0; i < len(template); i++ {
		c := template[i]
		if c != '\\' || i+1 == len(template) {
			out = append(out, c)
			continue
		}
		i++
		n := template[i]
		switch {
		case n == 'g':
			if i+1 >= len(template) || template[i+1] != '<' {
				return nil, fmt.Errorf("replacement %q: missing < after \\g", template)
			}
			end := strings.IndexByte(template[i+2:], '>')
			if end < 0 {
				return nil, fmt.Errorf("replacement %q: missing > after \\g<", template)
			}
			name := template[i+2 : i+2+end]
			idx, err := strconv.Atoi(name)
			if err != nil {
				idx = re.SubexpIndex(name)
				if idx < 0 {
					return nil, fmt.Errorf("replacement %q: unknown group name %q", template, name)
				}
			} else if idx > groups {
				return nil, fmt.Errorf("replacement %q: invalid group reference %d", template, idx)
			}
			out = append(out, group(idx)...)
			i += 2 + end
		case n == '0':
			// An octal escape, \0 to \077: Python's rule.
			j := i + 1
			for j < len(template) && j < i+3 && template[j] >= '0' && template[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(template[i:j], 8, 8)
			out = append(out, byte(v))
			i = j - 1
		case n >= '1' && n <= '9':
			j := i + 1
			if j < len(template) && template[j] >= '0' && template[j] <= '9' {
				j++
			}
			if j-i == 2 && j < len(template) && isOct(template[i]) && isOct(template[i+1]) && isOct(template[j]) {
				// Three octal digits: a character, as in Python.
				v, err := strconv.ParseUint(template[i:j+1], 8, 16)
				if err != nil || v > 0o377 {
					return nil, fmt.Errorf("replacement %q: octal escape \\%s out of range", template, template[i:j+1])
				}
				out = append(out, byte(v))
				i = j
				continue
			}
			idx, _ := strconv.Atoi(template[i:j])
			if idx > groups {
				return nil, fmt.Errorf("replacement %q: invalid group reference %d", template, idx)
			}
			out = append(out, group(idx)...)
			i = j - 1
		default:
			if e, ok := escapes[n]; ok {
				out = append(out, e)
				continue
			}
			if n >= 'a' && n <= 'z' || n >= 'A' && n <= 'Z' {
				return nil, fmt.Errorf("replacement %q: bad escape \\%c", template, n)
			}
			out = append(out, '\\', n)
		}
	}
	return out, nil
}

func isOct(c byte) bool { return c >= '0' && c <= '7' }

var escapes = map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', 'f': '\f', 'v': '\v', 'a': '\a', 'b': '\b', '\\': '\\'}
