package fnmatch

import (
	"regexp"
	"testing"
)

// TestTranslate: each pattern matches each name as Python 3's
// fnmatch.fnmatchcase says (the wants were printed by it).
func TestTranslate(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"*.conf", "a.conf", true},
		{"*.conf", "a.conf.bak", false},
		{"gpu[0-9]", "gpu3", true},
		{"gpu[!0-9]", "gpu3", false},
		{"gpu[!0-9]", "gpux", true},
		{"[^a]", "^", true},
		{"[^a]", "b", false},
		{"a[", "a[", true},
		{"[]]", "x", false},
		{"[]]", "]", true},
		{"a?c", "abc", true},
		{"a?c", "a\nc", true},
		{"*", "a\nb", true},
		{`[\]`, `\`, true},
		{"x.y", "xzy", false},
		{"[!]]", "a", true},
	} {
		re, err := regexp.Compile(Translate(c.pattern))
		if err != nil {
			t.Errorf("%q: %v", c.pattern, err)
			continue
		}
		if got := re.MatchString(c.name); got != c.want {
			t.Errorf("%q matches %q: %v, want %v (regexp %s)", c.pattern, c.name, got, c.want, re)
		}
	}
}
