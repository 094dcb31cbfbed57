// Package runtimeopts reads a CRI runtime's `options` table the way a given
// containerd turns it into the shim's options, so that every check of an
// option (rebuild, validation, health gate) agrees with the daemon rather
// than with the spelling in a file.
//
// The two generations differ (issue 10, defect 2; docs/containerd-versions.md):
//
//   - containerd 2.x marshals the options map with go-toml/v2 (keys sorted
//     by their bytes) and unmarshals the text into the shim's options
//     struct. A key matches a field without regard to case, and of two keys
//     that match one field the later one in the marshalled text wins: with
//     BinaryName and binaryName both set, binaryName wins.
//   - containerd 1.x builds a go-toml v1 tree from the map and unmarshals it.
//     go-toml v1 looks a field up under its name, its name in lower case, in
//     upper case and with the first letter lowered (BinaryName, binaryname,
//     BINARYNAME, binaryName) and takes the first that exists; any other
//     spelling is ignored.
package runtimeopts

import (
	"sort"
	"strings"
)

// RuncFields are the fields of the runc shim's options struct
// (io.containerd.runc.v2; containerd's runc options.Options) that a config
// file can set.
var RuncFields = []string{
	"NoPivotRoot", "NoNewKeyring", "ShimCgroup", "IoUid", "IoGid", "BinaryName", "Root",
	"CriuPath", "SystemdCgroup", "CriuImagePath", "CriuWorkPath", "TaskApiAddress", "TaskApiVersion",
}

// Winner returns the key of opts that containerd of the given major version
// decodes into field, and whether any key does.
func Winner(major int, opts map[string]any, field string) (string, bool) {
	if major >= 2 {
		var match []string
		for k := range opts {
			if strings.EqualFold(k, field) {
				match = append(match, k)
			}
		}
		if len(match) == 0 {
			return "", false
		}
		sort.Strings(match)
		return match[len(match)-1], true
	}
	for _, k := range []string{field, strings.ToLower(field), strings.ToUpper(field), strings.ToLower(field[:1]) + field[1:]} {
		if _, ok := opts[k]; ok {
			return k, true
		}
	}
	return "", false
}

// Decode returns the value containerd of the given major version decodes
// into field, and the key it came from.
func Decode(major int, opts map[string]any, field string) (value any, key string, ok bool) {
	key, ok = Winner(major, opts, field)
	if !ok {
		return nil, "", false
	}
	return opts[key], key, true
}

// Collisions lists the groups of keys of opts that are equal without regard
// to case (each group sorted, groups sorted by their first key): on 2.x only
// one of each group takes effect, whatever the file meant.
func Collisions(opts map[string]any) [][]string {
	by := map[string][]string{}
	for k := range opts {
		by[strings.ToLower(k)] = append(by[strings.ToLower(k)], k)
	}
	var out [][]string
	for _, g := range by {
		if len(g) > 1 {
			sort.Strings(g)
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// Canonical returns opts as containerd of the given major version reads
// them, spelled so that every generation reads them the same way: a key that
// names one of fields becomes the field's own name with the value the daemon
// decodes (the other spellings are dropped; a spelling this daemon ignores is
// dropped too, since it had no effect), and of other keys that are equal
// without regard to case only the one 2.x would take is kept. No two keys of
// the result collide without regard to case.
func Canonical(major int, opts map[string]any, fields []string) map[string]any {
	out := map[string]any{}
	taken := map[string]bool{}
	for _, f := range fields {
		if v, _, ok := Decode(major, opts, f); ok {
			out[f] = v
		}
		taken[strings.ToLower(f)] = true
	}
	rest := map[string]any{}
	for k, v := range opts {
		if !taken[strings.ToLower(k)] {
			rest[k] = v
		}
	}
	for k := range rest {
		if w, _ := Winner(2, rest, k); w == k {
			out[k] = rest[k]
		}
	}
	return out
}
