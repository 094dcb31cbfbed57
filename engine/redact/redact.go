// Package redact decides which configuration values are credentials and
// must never be shown: in diffs, effective-config changes, reports or logs.
// Built-in names cover containerd's registry credentials; users add their
// own with `--redact NAME` (a key name such as client_secret) or
// `--redact KEY.PATH` (a dotted key path, matched at its end).
package redact

import (
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Placeholder replaces every redacted value.
const Placeholder = "<redacted>"

var builtin = []string{"auths", "auth", "password", "passwd", "token", "identitytoken", "registrytoken", "secret"}

var (
	mu    sync.RWMutex
	names = map[string]bool{}
	paths []string
	re    *regexp.Regexp
)

func init() {
	for _, n := range builtin {
		names[n] = true
	}
	compile()
}

// Add registers user-listed keys: a word without dots is a key name
// redacted wherever it appears; a dotted path redacts that key (and
// everything under it) wherever the path ends a flattened key.
func Add(keys ...string) {
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
		case strings.Contains(k, "."):
			paths = append(paths, k)
			last := k[strings.LastIndex(k, ".")+1:]
			names[strings.ToLower(strings.Trim(last, `"'`))] = true
		default:
			names[strings.ToLower(k)] = true
		}
	}
	compile()
}

// compile rebuilds the line pattern; callers hold mu.
func compile() {
	var alts []string
	for n := range names {
		alts = append(alts, regexp.QuoteMeta(n))
	}
	sort.Strings(alts)
	words := strings.Join(alts, "|")
	re = regexp.MustCompile(`(?i)^(\s*["']?(?:[A-Za-z0-9_.-]*[._-])?(?:` + words + `)["']?\s*[=:]\s*)(.*)$`)
	inline = regexp.MustCompile(`(?i)[{,]\s*["']?(?:` + words + `)["']?\s*=`)
}

var inline *regexp.Regexp

// Segment reports whether one key segment names a credential.
func Segment(seg string) bool {
	mu.RLock()
	defer mu.RUnlock()
	return names[strings.ToLower(strings.Trim(seg, `"'`))]
}

// Key reports whether a flattened key (segments joined with '.') holds a
// credential: one of its segments is a credential name, or it lies at or
// under a user-listed path.
func Key(key string, segs []string) bool {
	for _, s := range segs {
		if Segment(s) {
			return true
		}
	}
	mu.RLock()
	defer mu.RUnlock()
	for _, p := range paths {
		if strings.HasSuffix(key, p) || strings.Contains(key, p+".") {
			return true
		}
	}
	return false
}

// Text replaces the values of credential keys in file text, line by line,
// so it works on files that do not parse (duplicated tables). An inline
// table holding a credential is redacted from that key on.
func Text(s string) string {
	if !strings.ContainsAny(s, "=:") {
		return s
	}
	mu.RLock()
	line, in := re, inline
	mu.RUnlock()
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		body := strings.TrimRight(l, "\r\n")
		nl := l[len(body):]
		if m := line.FindStringSubmatch(body); m != nil {
			lines[i] = m[1] + `"` + Placeholder + `"` + nl
			continue
		}
		if loc := in.FindStringIndex(body); loc != nil {
			lines[i] = body[:loc[0]] + Placeholder + nl
		}
	}
	return strings.Join(lines, "")
}
