package ctrconf

import (
	"fmt"
	"slices"
	"strings"

	"nodeconverge/engine/module"
)

// zeroText is a canonical value that is its type's zero value: the fields
// a table brings along when it is loaded, which views count, not list.
func zeroText(v string) bool {
	return module.EffectiveChange{After: v}.ZeroAfter()
}

// listAllUpTo is how many keys a rendering lists in full before it counts
// zero values instead of listing them.
const listAllUpTo = 8

// RenderTOML shows Flatten keys and their values (canonical text, already
// redacted where needed) as TOML: one table header per table, its keys
// below it, each line prefixed with indent. Beyond a few keys, zero values
// are counted rather than listed, because a replaced table lists every
// field and the few that matter drown.
func RenderTOML(keys []string, vals map[string]string, indent string) string {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, func(a, b string) int { return slices.Compare(splitKey(a), splitKey(b)) })
	hideZero := len(keys) > listAllUpTo
	var lines []string
	table, zeros := "\x00", 0
	for _, k := range keys {
		v := vals[k]
		if hideZero && zeroText(v) {
			zeros++
			continue
		}
		segs := splitKey(k)
		t := JoinKey(segs[:len(segs)-1]...)
		if t != table {
			table = t
			if t != "" {
				lines = append(lines, indent+"["+t+"]")
			}
		}
		in := indent
		if t != "" {
			in += "  "
		}
		lines = append(lines, in+quoteSegment(segs[len(segs)-1])+" = "+orEmpty(v))
	}
	if zeros > 0 {
		lines = append(lines, fmt.Sprintf("%s# and %d more keys at their zero value (false, \"\", 0, [] or {})", indent, zeros))
	}
	return strings.Join(lines, "\n")
}

func orEmpty(v string) string {
	if v == "" {
		return `""`
	}
	return v
}

// DescribeChanges shows changes of the effective config grouped by what
// happens to each key (set, changed, removed), the values as TOML, zero
// values counted beyond a few keys; imports and version never appear (they
// are not settings). "" when there is nothing to show.
func DescribeChanges(cs []module.EffectiveChange, indent string) string {
	var added, changed, removed []string
	vals := map[string]string{}
	old := map[string]string{}
	for _, c := range cs {
		if NotASetting(c.Key) {
			continue
		}
		switch {
		case c.Before == "":
			added = append(added, c.Key)
			vals[c.Key] = c.After
		case c.After == "":
			removed = append(removed, c.Key)
			vals[c.Key] = c.Before
		default:
			changed = append(changed, c.Key)
			vals[c.Key] = c.After
			old[c.Key] = c.Before
		}
	}
	var b []string
	if len(added) > 0 {
		b = append(b, indent+"now set:", RenderTOML(added, vals, indent+"  "))
	}
	if len(changed) > 0 {
		b = append(b, indent+"changed (was -> becomes):")
		cv := map[string]string{}
		for _, k := range changed {
			cv[k] = old[k] + "  ->  " + vals[k]
		}
		b = append(b, RenderTOML(changed, cv, indent+"  "))
	}
	if len(removed) > 0 {
		b = append(b, indent+"no longer set (containerd uses its default):", RenderTOML(removed, vals, indent+"  "))
	}
	return strings.Join(b, "\n")
}
