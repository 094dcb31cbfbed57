package ctrconf

import (
	"fmt"

	"nodeconverge/engine/module"
)

// DecidedBy says which loaded file of t decides the live value of key (a
// dump key, as EffectiveChange names it), read from the files' text by
// containerd's merge rule: on 1.x the last file that mentions the key's
// plugin supplies that plugin's whole table, so it sets the key or puts the
// default back; on 2.x the last file that sets the key wins. It is what a
// report shows beside an effective value; `nodeconverge explain` measures
// the same with the node's own dumps.
func (t *Tree) DecidedBy(key string) string {
	major := binMajor(t.BinVersion)
	if plugin := pluginOf(key); major < 2 && plugin != "" {
		var owner *File
		for i := range t.Files {
			f := &t.Files[i]
			for _, p := range f.Plugins {
				if p == plugin && f.Parses {
					owner = f
				}
			}
		}
		if owner == nil {
			return fmt.Sprintf("containerd's built-in default: no loaded file mentions %s", plugin)
		}
		if _, ok := owner.effectiveKeys(major)[key]; ok {
			return "set by " + owner.Path
		}
		return fmt.Sprintf("containerd's default, put back by %s: the last file containerd 1.x loads that mentions %s, whose table replaces the plugin's whole configuration", owner.Path, plugin)
	}
	for i := len(t.Files) - 1; i >= 0; i-- {
		if _, ok := t.Files[i].effectiveKeys(major)[key]; ok && t.Files[i].Parses {
			return "set by " + t.Files[i].Path
		}
	}
	return "containerd's built-in default: no loaded file sets it"
}

// Attribute fills DecidedBy of each change whose key has a live value with
// what decides it in t, the live tree the changes start from.
func Attribute(t *Tree, cs []module.EffectiveChange) []module.EffectiveChange {
	for i := range cs {
		if cs[i].Before != "" && !NotASetting(cs[i].Key) {
			cs[i].DecidedBy = t.DecidedBy(cs[i].Key)
		}
	}
	return cs
}
