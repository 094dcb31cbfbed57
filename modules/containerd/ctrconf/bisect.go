package ctrconf

import "sort"

// WrittenLost is a value a file writes that the whole tree's dump does not
// have, read from the file's text and that one dump alone (no history):
// what a tree too large to measure one file at a time starts from. Key is
// the file's spelling, DumpKey the dump's name for it.
type WrittenLost struct {
	File    string
	Key     string
	DumpKey string
	Written string
	// Effective is the dump's value ("" with Absent when the dump lacks it).
	Effective string
	Absent    bool
}

// LostByText lists every value a parseable file of t writes that base does
// not have in effect (the comparison anyLost makes), in load order.
func LostByText(t *Tree, base *Effective) []WrittenLost {
	major := binMajor(t.BinVersion)
	final, lower := base.flat(), base.lowerFlat()
	var out []WrittenLost
	for i := range t.Files {
		f := &t.Files[i]
		keys := make([]string, 0, len(f.keys))
		for k := range f.keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, key := range keys {
			ekey, ev, ok, lost := lostIn(f, key, final, lower, major)
			if !lost {
				continue
			}
			w := f.keys[key]
			if _, nv, mig := migratedKey(key, w, f.Version, major); mig {
				w = nv
			}
			out = append(out, WrittenLost{File: f.Path, Key: key, DumpKey: ekey, Written: w, Effective: ev, Absent: !ok})
		}
	}
	return out
}
