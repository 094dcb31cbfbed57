// Package fnmatch reads shell-style wildcards as Python's fnmatch does,
// for the places where Ansible matches names with it: host patterns
// (inventory) and the find module's patterns. One translation serves
// both so that a pattern means the same thing wherever a playbook or an
// inventory gives it.
package fnmatch

import (
	"regexp"
	"strings"
)

// Translate is Python's fnmatch.translate: * any run, ? one character,
// [seq] and [!seq] classes, everything else literal; the whole name must
// match, newlines included. An unclosed [ is a literal, and a class that
// starts with ^ takes it literally, as Python's does.
func Translate(p string) string {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			j := i + 1
			if j < len(p) && p[j] == '!' {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			for j < len(p) && p[j] != ']' {
				j++
			}
			if j >= len(p) {
				b.WriteString(`\[`)
				continue
			}
			class := p[i+1 : j]
			class = strings.ReplaceAll(class, `\`, `\\`)
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			} else if strings.HasPrefix(class, "^") {
				class = `\` + class
			}
			b.WriteString("[" + class + "]")
			i = j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`$`)
	return b.String()
}
