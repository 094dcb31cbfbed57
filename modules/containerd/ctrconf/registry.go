package ctrconf

import (
	"fmt"
	"slices"
	"strings"
)

// RegistryConflict names a registry that sets both config_path and mirrors:
// `config dump` prints it, but the CRI plugin refuses to start ("mirrors
// cannot be set when config_path is provided"), so every module that writes
// containerd config refuses a candidate that has both. It looks the two up
// in the parsed dump, not in its flattened keys: every write's candidate is
// checked, and flattening a whole dump for two tables cost the controller
// more than any other step of a drift run.
func RegistryConflict(e *Effective) string {
	if e == nil || !e.OK {
		return ""
	}
	for _, plugin := range []string{CRIPlugin, CRIImagesPlugin} {
		reg := table(e.Values, "plugins", plugin, "registry")
		cpv, ok := reg["config_path"]
		if !ok {
			continue
		}
		cp := canonical(cpv)
		if cp == `""` || cp == "" {
			continue
		}
		mirrors := table(reg, "mirrors")
		if len(mirrors) == 0 {
			// containerd 1.x refuses configs.<host>.tls with config_path
			// too ("`configs.tls` cannot be set when `config_path` is
			// provided"); 2.x has no such field.
			var tls []string
			for h := range table(reg, "configs") {
				if _, ok := table(reg, "configs", h)["tls"].(map[string]any); ok {
					tls = append(tls, h)
				}
			}
			if len(tls) == 0 {
				continue
			}
			slices.Sort(tls)
			key := JoinKey("plugins", plugin, "registry")
			return fmt.Sprintf("%s.config_path = %s and %s would both be set; containerd's CRI plugin refuses configs.tls together with config_path: move the TLS settings into %s/<host>/hosts.toml",
				key, cp, key+".configs."+quoteSegment(tls[0])+".tls", strings.Trim(cp, `"`))
		}
		names := make([]string, 0, len(mirrors))
		for n := range mirrors {
			names = append(names, n)
		}
		slices.Sort(names)
		key := JoinKey("plugins", plugin, "registry")
		return fmt.Sprintf("%s.config_path = %s and %s would both be set; containerd's CRI plugin refuses mirrors together with config_path: move the mirrors into %s/<host>/hosts.toml",
			key, cp, key+".mirrors."+quoteSegment(names[0]), strings.Trim(cp, `"`))
	}
	return ""
}

// table follows keys through nested tables of a parsed config; nil when
// one is missing or not a table.
func table(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}
