package command

import (
	"errors"
	"strings"
)

// SplitArgs splits a command line into argv the way Ansible's `command` module does (Python's
// shlex.split in POSIX mode): words separated by blanks, single quotes literal, double quotes with
// backslash escapes of `\`, `"`, `$` and backquote, a backslash outside quotes escaping the next
// character. Nothing is expanded and no operator means anything: `$(x)`, backquotes, `;`, `|`, `>`
// and globs are plain characters of a word, because no shell ever sees the result.
func SplitArgs(s string) ([]string, error) {
	var (
		out     []string
		cur     strings.Builder
		inWord  bool
		rs      = []rune(s)
		isBlank = func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
	)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case isBlank(r):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '\\':
			inWord = true
			if i+1 >= len(rs) {
				return nil, errors.New("command line ends with an unescaped backslash")
			}
			i++
			cur.WriteRune(rs[i])
		case r == '\'':
			inWord = true
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j >= len(rs) {
				return nil, errors.New("command line has an unterminated single quote")
			}
			cur.WriteString(string(rs[i+1 : j]))
			i = j
		case r == '"':
			inWord = true
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) && strings.ContainsRune("\\\"$`", rs[j+1]) {
					j++
				}
				cur.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return nil, errors.New("command line has an unterminated double quote")
			}
			i = j
		default:
			inWord = true
			cur.WriteRune(r)
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
