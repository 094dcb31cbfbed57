package ctrconf

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/redact"
)

// Redacted replaces the value of every key Redact matches in anything this
// package returns for display.
const Redacted = redact.Placeholder

// Redact reports whether the value at key (a Flatten key) may carry a
// credential and must never be shown: registry credentials (auths, auth,
// password, identitytoken, ...) and every key the user listed. It errs on
// the safe side: everything under an auth table is redacted, usernames
// included.
func Redact(key string) bool {
	return redact.Key(key, splitKey(key))
}

// quoteSegment writes a key segment as TOML does: bare when it can be
// ([A-Za-z0-9_-]+). Every key of every dump goes through it, so it is a
// byte loop, not a regexp (which cost a tenth of a drift run's CPU).
func quoteSegment(s string) string {
	if s == "" {
		return `""`
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return strconv.Quote(s)
		}
	}
	return s
}

// JoinKey builds a Flatten key from raw segments.
func JoinKey(segs ...string) string {
	q := make([]string, len(segs))
	for i, s := range segs {
		q[i] = quoteSegment(s)
	}
	return strings.Join(q, ".")
}

// splitKey undoes JoinKey.
func splitKey(key string) []string {
	var out []string
	for len(key) > 0 {
		if key[0] == '"' {
			// Find the closing quote that is not escaped.
			end := 1
			for end < len(key) && key[end] != '"' {
				if key[end] == '\\' {
					end++
				}
				end++
			}
			seg, err := strconv.Unquote(key[:min(end+1, len(key))])
			if err != nil {
				seg = key[1:min(end, len(key))]
			}
			out = append(out, seg)
			key = key[min(end+1, len(key)):]
		} else {
			i := strings.IndexByte(key, '.')
			if i < 0 {
				out = append(out, key)
				break
			}
			out = append(out, key[:i])
			key = key[i:]
		}
		key = strings.TrimPrefix(key, ".")
	}
	return out
}

// pluginOf is the plugin id a Flatten key belongs to, "" for top-level keys.
func pluginOf(key string) string {
	segs := splitKey(key)
	if len(segs) >= 2 && segs[0] == "plugins" {
		return segs[1]
	}
	return ""
}

// Flatten turns a parsed config into one entry per leaf: the key path
// (segments TOML-quoted where needed, joined with '.') and the value's
// canonical text: strings quoted, numbers and booleans bare, arrays and
// inline tables in TOML-like syntax, an empty table as "{}" so that its
// presence counts. Credentials (see Redact) come out as Redacted.
func Flatten(v map[string]any) map[string]string {
	out := flatten(v)
	for k := range out {
		if Redact(k) {
			out[k] = Redacted
		}
	}
	return out
}

// flatten is Flatten without redaction, for comparing values.
func flatten(v map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		if len(m) == 0 && prefix != "" {
			out[prefix] = "{}"
			return
		}
		for k, val := range m {
			key := quoteSegment(k)
			if prefix != "" {
				key = prefix + "." + key
			}
			if sub, ok := val.(map[string]any); ok {
				walk(key, sub)
				continue
			}
			out[key] = canonical(val)
		}
	}
	walk("", v)
	return out
}

// canonical is the text of one TOML value, the same for equal values however
// they were written.
func canonical(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return fmt.Sprint(x)
		}
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatFloat(x, 'f', 1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return fmt.Sprint(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = canonical(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = quoteSegment(k) + " = " + canonical(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		return fmt.Sprint(x)
	}
}

// Diff lists every key whose effective value differs between two dumps,
// sorted by key; Before or After is "" where the key is absent. Values the
// CRI plugin fills in the same way count as equal (FilledByCRI). A dump that
// failed counts as having no keys. Credentials are compared but shown as
// Redacted, so a changed password shows up as a change without its value.
func Diff(before, after *Effective) []module.EffectiveChange {
	return diffFlat(before.flat(), after.flat())
}

func diffFlat(b, a map[string]string) []module.EffectiveChange {
	var out []module.EffectiveChange
	for k, bv := range b {
		if NotASetting(k) {
			continue
		}
		if av, ok := a[k]; (!ok || av != bv) && !FilledByCRI(k, bv, av) {
			out = append(out, change(k, bv, a[k]))
		}
	}
	for k, av := range a {
		if NotASetting(k) {
			continue
		}
		if _, ok := b[k]; !ok && !FilledByCRI(k, "", av) {
			out = append(out, change(k, "", av))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// NotASetting reports whether a dump key describes the tree rather than
// configuring the daemon: `imports` lists the files that were loaded and
// `version` the schema. A new drop-in changes `imports` by existing, so
// neither may count as an effective setting that a change alters.
func NotASetting(key string) bool { return key == "imports" || key == "version" }

// change builds an EffectiveChange with credentials redacted.
func change(key, before, after string) module.EffectiveChange {
	if Redact(key) {
		if before != "" {
			before = Redacted
		}
		if after != "" {
			after = Redacted
		}
	}
	return module.EffectiveChange{Key: key, Before: before, After: after}
}

// shown is a value as it may be displayed.
func shown(key, v string) string {
	if v != "" && Redact(key) {
		return Redacted
	}
	return v
}

// Canonical is the text Flatten gives a value, for comparing a value a
// playbook declares with Effective.Get: a string quoted, an int64 in
// decimal, a list as "[a, b]".
func Canonical(v any) string { return canonical(v) }
