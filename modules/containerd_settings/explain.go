package containerdsettings

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"nodeconverge/modules/containerd/ctrconf"
)

// Declared decodes a containerd_settings task's argument mapping as written
// in a playbook (no variables substituted), for `nodeconverge explain
// --playbook` (ctrconf.Declarer).
func (Module) Declared(n *yaml.Node) (ctrconf.Declaration, error) {
	a := Module{}.NewArgs().(*Args)
	if n != nil {
		if err := n.Decode(a); err != nil {
			return nil, fmt.Errorf("containerd_settings arguments: %w", err)
		}
	}
	return a.Settings, nil
}

// Place finds each declared value in a measured explanation: the value is
// read as the explanation's daemon version names and decodes it (an option
// under 2.x in any case), and the deciding file is the one the explanation
// measured, not one read from the files.
func (settings Settings) Place(ex *ctrconf.Explanation) []ctrconf.DeclaredValue {
	major := ctrconf.MajorOf(ex.BinVersion)
	out := make([]ctrconf.DeclaredValue, 0, len(settings))
	for _, s := range settings {
		dv := ctrconf.DeclaredValue{Key: s.Key, DumpKey: ctrconf.JoinKey(s.def.dumpPath(major)...), Declared: s.want(), Effective: "(not set)"}
		for _, k := range ex.Keys {
			if k.Key == dv.DumpKey || s.def.option != "" && major >= 2 && s.owns(k.Key, major) {
				dv.Effective, dv.DecidedBy, dv.ResetBy = k.Value, k.File, k.ResetBy
			}
		}
		dv.InEffect = dv.Effective == dv.Declared
		out = append(out, dv)
	}
	return out
}
