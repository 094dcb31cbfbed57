package containerdnvidia

import (
	"sort"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/modules/containerd/ctrconf"
	"nodeconverge/modules/containerd/nvidiatoml"
)

// carryToV3 finishes converting a version 2 file to the version 3 layout
// (issue 28 #2): the rebuild renders the managed runtimes under 2.x's names
// and sets `version = 3`, but everything else the file writes under the
// version 2 CRI table (the incident's pinned sandbox image, config_path, the
// operator's runc) would then be read as version 3 names that no plugin has,
// and dropped. Each such value moves to the name containerd 2.x's own
// migration gives it (ctrconf.MigratedKey), line-level: the old lines are
// stripped, the new keys set; the CRI server's own keys stay. A file that
// cannot be converted this way is returned as it was (the dumps then judge
// the layout, and the file's own layout is staged too).
func carryToV3(cand []byte) []byte {
	var doc map[string]any
	if err := toml.Unmarshal(cand, &doc); err != nil {
		return cand
	}
	plugins, _ := doc["plugins"].(map[string]any)
	cri, _ := plugins[ctrconf.CRIPlugin].(map[string]any)
	if len(cri) == 0 {
		return cand
	}
	type move struct {
		path  []string
		value any
	}
	var moves []move
	var walk func(m map[string]any, rel []string)
	walk = func(m map[string]any, rel []string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			segs := append(append([]string(nil), rel...), k)
			if len(segs) == 1 && ctrconf.CRIServerKey(k) {
				continue
			}
			v := m[k]
			if sub, ok := v.(map[string]any); ok {
				walk(sub, segs)
				continue
			}
			key := ctrconf.JoinKey(append([]string{"plugins", ctrconf.CRIPlugin}, segs...)...)
			nk, _, ok := ctrconf.MigratedKey(key, ctrconf.Canonical(v), 2, 2)
			if !ok {
				continue // dropped by 2.x (enable_cdi is always on)
			}
			if segs[0] == "cni" && len(segs) == 2 && segs[1] == "bin_dir" {
				v = []any{v}
			}
			moves = append(moves, move{path: ctrconf.SplitKey(nk), value: v})
		}
	}
	walk(cri, nil)
	out, _ := nvidiatoml.StripTables(cand, func(p []string) bool {
		return len(p) >= 3 && p[0] == "plugins" && p[1] == ctrconf.CRIPlugin && !ctrconf.CRIServerKey(p[2])
	})
	for _, mv := range moves {
		next, err := nvidiatoml.SetKey(out, mv.path, mv.value, false)
		if err != nil {
			return cand
		}
		out = next
	}
	if err := toml.Unmarshal(out, &doc); err != nil {
		return cand
	}
	return out
}
