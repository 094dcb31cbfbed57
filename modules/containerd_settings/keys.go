package containerdsettings

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"nodeconverge/modules/containerd/ctrconf"
)

// valueType is what a setting's value must be, checked at load.
type valueType int

const (
	tString valueType = iota
	tBool
	tInt
	tStrings
)

func (t valueType) String() string {
	return [...]string{"a string", "a boolean", "an integer", "a list of strings"}[t]
}

// keyDef is one setting containerd's CRI plugins know, spelled for each
// layout: config version 2 (containerd 1.x, and what 2.x migrates) keeps
// everything in io.containerd.grpc.v1.cri; version 3 (2.x) splits it into
// the images and runtime plugins and renames a few keys. Both spellings
// come from containerd's own `config default` and its ConfigMigration
// (plugins/cri/{images,runtime}/plugin.go in 2.x).
type keyDef struct {
	typ      valueType
	v2       []string // path under plugins."io.containerd.grpc.v1.cri"
	v3Plugin string
	v3       []string
	// option is set for a runtime's shim option: containerd 1.x decodes it
	// by exact name, 2.x case-insensitively (runtimeopts).
	option string
	// runtime is the runtime handler an option or runtime key belongs to.
	runtime string
}

// fixed are the settings with one fixed path, by logical name.
var fixed = map[string]keyDef{
	"cri.registry.config_path":                         {typ: tString, v2: []string{"registry", "config_path"}, v3Plugin: ctrconf.CRIImagesPlugin, v3: []string{"registry", "config_path"}},
	"cri.sandbox_image":                                {typ: tString, v2: []string{"sandbox_image"}, v3Plugin: ctrconf.CRIImagesPlugin, v3: []string{"pinned_images", "sandbox"}},
	"cri.snapshotter":                                  {typ: tString, v2: []string{"containerd", "snapshotter"}, v3Plugin: ctrconf.CRIImagesPlugin, v3: []string{"snapshotter"}},
	"cri.max_concurrent_downloads":                     {typ: tInt, v2: []string{"max_concurrent_downloads"}, v3Plugin: ctrconf.CRIImagesPlugin, v3: []string{"max_concurrent_downloads"}},
	"cri.default_runtime_name":                         {typ: tString, v2: []string{"containerd", "default_runtime_name"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"containerd", "default_runtime_name"}},
	"cri.cdi_spec_dirs":                                {typ: tStrings, v2: []string{"cdi_spec_dirs"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"cdi_spec_dirs"}},
	"cri.max_container_log_line_size":                  {typ: tInt, v2: []string{"max_container_log_line_size"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"max_container_log_line_size"}},
	"cri.enable_unprivileged_ports":                    {typ: tBool, v2: []string{"enable_unprivileged_ports"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"enable_unprivileged_ports"}},
	"cri.enable_unprivileged_icmp":                     {typ: tBool, v2: []string{"enable_unprivileged_icmp"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"enable_unprivileged_icmp"}},
	"cri.device_ownership_from_security_context":       {typ: tBool, v2: []string{"device_ownership_from_security_context"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"device_ownership_from_security_context"}},
	"cri.cni.conf_dir":                                 {typ: tString, v2: []string{"cni", "conf_dir"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"cni", "conf_dir"}},
	"cri.cni.max_conf_num":                             {typ: tInt, v2: []string{"cni", "max_conf_num"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"cni", "max_conf_num"}},
	"cri.containerd.discard_unpacked_layers":           {typ: tBool, v2: []string{"containerd", "discard_unpacked_layers"}, v3Plugin: ctrconf.CRIImagesPlugin, v3: []string{"discard_unpacked_layers"}},
	"cri.image_pull_progress_timeout":                  {typ: tString, v2: []string{"image_pull_progress_timeout"}, v3Plugin: ctrconf.CRIImagesPlugin, v3: []string{"image_pull_progress_timeout"}},
	"cri.containerd.disable_snapshot_annotations":      {typ: tBool, v2: []string{"containerd", "disable_snapshot_annotations"}, v3Plugin: ctrconf.CRIImagesPlugin, v3: []string{"disable_snapshot_annotations"}},
	"cri.disable_apparmor":                             {typ: tBool, v2: []string{"disable_apparmor"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"disable_apparmor"}},
	"cri.restrict_oom_score_adj":                       {typ: tBool, v2: []string{"restrict_oom_score_adj"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"restrict_oom_score_adj"}},
	"cri.disable_hugetlb_controller":                   {typ: tBool, v2: []string{"disable_hugetlb_controller"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"disable_hugetlb_controller"}},
	"cri.ignore_image_defined_volumes":                 {typ: tBool, v2: []string{"ignore_image_defined_volumes"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"ignore_image_defined_volumes"}},
	"cri.tolerate_missing_hugetlb_controller":          {typ: tBool, v2: []string{"tolerate_missing_hugetlb_controller"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"tolerate_missing_hugetlb_controller"}},
	"cri.disable_proc_mount":                           {typ: tBool, v2: []string{"disable_proc_mount"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"disable_proc_mount"}},
	"cri.containerd.ignore_blockio_not_enabled_errors": {typ: tBool, v2: []string{"containerd", "ignore_blockio_not_enabled_errors"}, v3Plugin: ctrconf.CRIRuntimePlugin, v3: []string{"containerd", "ignore_blockio_not_enabled_errors"}},
}

// runtimeKeys are the settings of one runtime handler,
// cri.runtimes.<name>.<key>.
var runtimeKeys = map[string]valueType{
	"runtime_type":                    tString,
	"runtime_path":                    tString,
	"privileged_without_host_devices": tBool,
	"pod_annotations":                 tStrings,
	"container_annotations":           tStrings,
	"base_runtime_spec":               tString,
	"cni_conf_dir":                    tString,
	"cni_max_conf_num":                tInt,
	"snapshotter":                     tString,
}

// runcOptions are runc's shim options (containerd's runc options proto),
// by their canonical spelling.
var runcOptions = map[string]valueType{
	"BinaryName":    tString,
	"SystemdCgroup": tBool,
	"Root":          tString,
	"CriuPath":      tString,
	"CriuImagePath": tString,
	"CriuWorkPath":  tString,
	"NoPivotRoot":   tBool,
	"NoNewKeyring":  tBool,
	"ShimCgroup":    tString,
	"IoUid":         tInt,
	"IoGid":         tInt,
}

// lookup resolves a logical key path, or says what is wrong with it.
func lookup(name string) (keyDef, error) {
	if d, ok := fixed[name]; ok {
		return d, nil
	}
	rest, ok := strings.CutPrefix(name, "cri.runtimes.")
	if !ok {
		return keyDef{}, fmt.Errorf("unknown key %q%s", name, suggest(name))
	}
	// cri.runtimes.<name>.<key> or cri.runtimes.<name>.options.<Option>;
	// a handler name may hold dots, so the key is found from the right.
	if i := strings.LastIndex(rest, ".options."); i > 0 {
		rt, opt := rest[:i], rest[i+len(".options."):]
		typ, ok := runcOptions[opt]
		if !ok {
			for known := range runcOptions {
				if strings.EqualFold(known, opt) {
					return keyDef{}, fmt.Errorf("runtime option %q is spelled %q: containerd 2.x reads option names case-insensitively and 1.x exactly, so only the canonical spelling is accepted", opt, known)
				}
			}
			return keyDef{}, fmt.Errorf("unknown runc option %q in %q (known: %s)", opt, name, strings.Join(sortedNames(runcOptions), ", "))
		}
		path := []string{"containerd", "runtimes", rt, "options", opt}
		return keyDef{typ: typ, v2: path, v3Plugin: ctrconf.CRIRuntimePlugin, v3: path, option: opt, runtime: rt}, nil
	}
	i := strings.LastIndex(rest, ".")
	if i <= 0 {
		return keyDef{}, fmt.Errorf("%q names no key of a runtime: use cri.runtimes.<name>.<key> or cri.runtimes.<name>.options.<Option>", name)
	}
	rt, key := rest[:i], rest[i+1:]
	typ, ok := runtimeKeys[key]
	if !ok {
		return keyDef{}, fmt.Errorf("unknown runtime key %q in %q (known: %s, options.<Option>)", key, name, strings.Join(sortedNames(runtimeKeys), ", "))
	}
	path := []string{"containerd", "runtimes", rt, key}
	return keyDef{typ: typ, v2: path, v3Plugin: ctrconf.CRIRuntimePlugin, v3: path, runtime: rt}, nil
}

// suggest names the known keys closest to a mistyped one.
func suggest(name string) string {
	var near []string
	last := name[strings.LastIndex(name, ".")+1:]
	for k := range fixed {
		if strings.HasSuffix(k, "."+last) || strings.Contains(k, last) && len(last) > 3 {
			near = append(near, k)
		}
	}
	if len(near) == 0 {
		return " (keys start with cri.: " + strings.Join(sortedNames(fixed)[:4], ", ") + ", ..., cri.runtimes.<name>.options.<Option>)"
	}
	sort.Strings(near)
	return " (did you mean " + strings.Join(near, " or ") + "?)"
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// dumpPath is the key's path in the dump of a containerd of major version
// major: every 2.x migrates every file to the version 3 layout first.
func (d keyDef) dumpPath(major int) []string {
	if major >= 2 {
		return append([]string{"plugins", d.v3Plugin}, d.v3...)
	}
	return append([]string{"plugins", ctrconf.CRIPlugin}, d.v2...)
}

// filePath is the key's path as a file of config version ver spells it;
// version 1 is an unversioned file that names the CRI plugin `cri`.
func (d keyDef) filePath(ver int) []string {
	switch {
	case ver >= 3:
		return append([]string{"plugins", d.v3Plugin}, d.v3...)
	case ver == 1:
		return append([]string{"plugins", "cri"}, d.v2...)
	}
	return append([]string{"plugins", ctrconf.CRIPlugin}, d.v2...)
}

// DumpKey is the Flatten key under which a containerd of major version
// major prints the setting named by a logical key path, for readers of a
// dump (tests, reports) that must not keep their own copy of the mapping.
func DumpKey(logical string, major int) (string, error) {
	d, err := lookup(logical)
	if err != nil {
		return "", err
	}
	return ctrconf.JoinKey(d.dumpPath(major)...), nil
}
