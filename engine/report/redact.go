package report

import (
	"regexp"
	"strings"
)

// secretKey matches a TOML/INI/YAML key that carries a credential, as it
// appears at the start of a line of a file diff: `password = "..."`,
// `"identitytoken": ...`, `auth = '...'`.
var secretLine = regexp.MustCompile(`(?i)^(\s*["']?(?:[A-Za-z0-9_.-]*[._-])?(?:password|passwd|token|identitytoken|registrytoken|auth|secret)["']?\s*[=:]\s*)(.*)$`)

// RedactText replaces the values of credential keys in file text, line by
// line, so diffs never show a registry password. It works on text that does
// not parse (a file with duplicated tables still gets redacted). Inline
// tables such as `auths = { x = { password = "p" } }` are redacted whole
// from the first credential-looking key on.
func RedactText(s string) string {
	if !strings.ContainsAny(s, "=:") {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		body := strings.TrimRight(l, "\r\n")
		nl := l[len(body):]
		if m := secretLine.FindStringSubmatch(body); m != nil {
			lines[i] = m[1] + `"<redacted>"` + nl
			continue
		}
		if inline := inlineSecret.FindStringIndex(body); inline != nil {
			lines[i] = body[:inline[0]] + `<redacted>` + nl
		}
	}
	return strings.Join(lines, "")
}

// inlineSecret finds a credential key inside an inline table on one line.
var inlineSecret = regexp.MustCompile(`(?i)[{,]\s*["']?(?:password|passwd|token|identitytoken|registrytoken|auth|secret)["']?\s*=`)
