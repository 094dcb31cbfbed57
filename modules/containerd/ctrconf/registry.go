package ctrconf

import (
	"fmt"
	"strings"
)

// RegistryConflict names a registry that sets both config_path and mirrors:
// `config dump` prints it, but the CRI plugin refuses to start ("mirrors
// cannot be set when config_path is provided"), so every module that writes
// containerd config refuses a candidate that has both.
func RegistryConflict(e *Effective) string {
	for _, plugin := range []string{CRIPlugin, CRIImagesPlugin} {
		reg := JoinKey("plugins", plugin, "registry")
		cp, ok := e.Get(reg + ".config_path")
		if !ok || cp == `""` || cp == "" {
			continue
		}
		for k := range e.Flat() {
			if strings.HasPrefix(k, reg+".mirrors.") {
				return fmt.Sprintf("%s.config_path = %s and %s would both be set; containerd's CRI plugin refuses mirrors together with config_path: move the mirrors into %s/<host>/hosts.toml", reg, cp, k, strings.Trim(cp, `"`))
			}
		}
	}
	return ""
}
