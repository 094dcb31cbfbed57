package containerdsettings

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"nodeconverge/modules/containerd/ctrconf"
)

// DeclaredValue is one declared setting as `nodeconverge explain` shows it:
// what the playbook declares, what the node loads, and which file decides
// it, all from the explanation's measured attribution.
type DeclaredValue struct {
	Key       string `json:"key"`
	DumpKey   string `json:"dump_key"`
	Declared  string `json:"declared"`
	Effective string `json:"effective"`
	InEffect  bool   `json:"in_effect"`
	// DecidedBy is the file whose loading gave the key its value; "" for
	// containerd's built-in default.
	DecidedBy string `json:"decided_by,omitempty"`
	// ResetBy is, for a default, the file that put it back (containerd
	// 1.x: the file that replaced the plugin's table).
	ResetBy string `json:"reset_by,omitempty"`
}

// ArgsOf decodes a containerd_settings task's argument mapping as written
// in a playbook (no variables substituted).
func ArgsOf(n *yaml.Node) (Settings, error) {
	a := Module{}.NewArgs().(*Args)
	if n != nil {
		if err := n.Decode(a); err != nil {
			return nil, fmt.Errorf("containerd_settings arguments: %w", err)
		}
	}
	return a.Settings, nil
}

// Explain places each declared value in a measured explanation: the value
// is read as the explanation's daemon version names and decodes it (an
// option under 2.x in any case), and the deciding file is the one the
// explanation measured, not one read from the files.
func Explain(ex *ctrconf.Explanation, settings Settings) []DeclaredValue {
	major := ctrconf.MajorOf(ex.BinVersion)
	out := make([]DeclaredValue, 0, len(settings))
	for _, s := range settings {
		dv := DeclaredValue{Key: s.Key, DumpKey: ctrconf.JoinKey(s.def.dumpPath(major)...), Declared: s.want(), Effective: "(not set)"}
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
