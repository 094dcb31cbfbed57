// Package nvidiatoml is the text engine of the containerd_nvidia module: it
// removes every nvidia runtime definition from a containerd TOML file and
// writes exactly one set back, so that zero, one or two runs give the same
// file (INCIDENT.md, "The fix, and its two properties").
//
// It works on bytes, line by line, never through a TOML parser: the file it
// must repair may declare the same table twice (an nvidia block pasted
// twice with >>), and such a file does not parse. Every line that is not
// part of an nvidia runtime is kept byte for byte: comments, blank lines,
// order, CRLF line endings and a missing final newline.
//
// What counts as "part of an nvidia runtime":
//   - a table header [P.NAME] or [[P.NAME...]] with P one of the runtimes
//     prefixes below and NAME accepted by isNvidia, every table beneath it,
//     and the lines of their bodies up to the next header, except the
//     comments that follow the body's last key, indented no deeper than its
//     header (from the first such comment on, blank lines included): those
//     are the operator's notes about what comes next, and an nvidia block
//     pasted above them must not take them along;
//   - the comment lines directly above such a header (no blank line in
//     between) that are indented no deeper than the header: they describe
//     it ("# nvidia runtime"). By the same rule, comment lines at the end of
//     a stripped body that sit directly above a kept header, no deeper than
//     it, belong to that kept header and are kept;
//   - a key line anywhere that assigns into such a runtime through dotted
//     keys or an inline table (`runtimes.nvidia.runtime_type = "x"` under
//     [P without .runtimes], `nvidia = { ... }` under [P]), including its
//     multi-line value;
//   - optionally, `default_runtime_name` lines naming such a runtime.
//
// Runtimes prefixes recognised whatever the layout asked for:
// plugins."io.containerd.grpc.v1.cri".containerd.runtimes (config version 2),
// plugins."io.containerd.cri.v1.runtime".containerd.runtimes (version 3) and
// plugins.cri.containerd.runtimes (version 1, still read by containerd 1.x),
// in any quoting and spacing.
package nvidiatoml

import (
	"slices"
)

// Runtime is one containerd runtime handler to render.
type Runtime struct {
	// Name is the runtime handler name, the key under .runtimes.
	Name string
	// RuntimeType is the shim, e.g. "io.containerd.runc.v2".
	RuntimeType string
	// BinaryName goes into the options table; empty omits it.
	BinaryName string
	// Options are further keys of the options table (SystemdCgroup = true),
	// rendered sorted by key together with BinaryName. Values may be
	// strings, bools, integers, floats, slices and map[string]any.
	Options map[string]any
	// Fields are further keys of the runtime's own table, after
	// runtime_type and sorted by key: the operator's fields a rebuild
	// keeps (base_runtime_spec, privileged_without_host_devices, ...).
	Fields map[string]any
}

// Layout selects the containerd config version the runtimes are written for.
type Layout struct {
	// Version is the containerd config version: 2 (containerd 1.x) or 3
	// (2.x); 1 is the unversioned layout of containerd 1.0-1.2 that names
	// the CRI plugin `cri` (every containerd still reads it).
	Version int
}

// Plugin IDs whose .containerd.runtimes table holds runtime handlers.
const (
	pluginV2 = "io.containerd.grpc.v1.cri"
	pluginV3 = "io.containerd.cri.v1.runtime"
	pluginV1 = "cri"
)

// knownPlugin reports whether id is a plugin whose runtimes Strip looks at.
func knownPlugin(id string) bool {
	return id == pluginV2 || id == pluginV3 || id == pluginV1
}

// plugin returns the CRI plugin ID holding runtimes in l, "" if l is invalid.
func (l Layout) plugin() string {
	switch l.Version {
	case 1:
		return pluginV1
	case 2:
		return pluginV2
	case 3:
		return pluginV3
	}
	return ""
}

// RuntimesPrefix returns the table prefix holding runtimes: for version 1
// `plugins.cri.containerd.runtimes`, for version 2
// `plugins."io.containerd.grpc.v1.cri".containerd.runtimes`, for version 3
// `plugins."io.containerd.cri.v1.runtime".containerd.runtimes`, and "" for
// any other version.
func (l Layout) RuntimesPrefix() string {
	p := l.plugin()
	if p == "" {
		return ""
	}
	return formatPath([]string{"plugins", p, "containerd", "runtimes"})
}

// IsManaged returns the rule the containerd_nvidia module strips by: a
// runtime is the module's if its name is one of the requested names, and
// only then. k3s's nvidia-experimental and microk8s's
// nvidia-container-runtime are other installers' runtimes that merely start
// with "nvidia"; they are left alone (issue 10, defect 7). Leftovers of an
// earlier install are managed when the play names them, as the default
// names (the GPU Operator's nvidia, nvidia-cdi, nvidia-legacy) do.
func IsManaged(requested []string) func(string) bool {
	req := slices.Clone(requested)
	return func(name string) bool {
		return slices.Contains(req, name)
	}
}

// runtimeOf returns the plugin ID and runtime name if path lies at or
// beneath plugins.<known plugin>.containerd.runtimes.<name>.
func runtimeOf(path []string) (plugin, name string, ok bool) {
	if len(path) < 5 || path[0] != "plugins" || !knownPlugin(path[1]) ||
		path[2] != "containerd" || path[3] != "runtimes" {
		return "", "", false
	}
	return path[1], path[4], true
}

// holdsRuntimes reports whether path names a table that contains the
// runtimes table of a known plugin (plugins, plugins.X, ...containerd,
// ...containerd.runtimes).
func holdsRuntimes(path []string) bool {
	want := []string{"plugins", "", "containerd", "runtimes"}
	if len(path) == 0 || len(path) > len(want) {
		return false
	}
	for i, p := range path {
		if i == 1 {
			if !knownPlugin(p) {
				return false
			}
			continue
		}
		if p != want[i] {
			return false
		}
	}
	return true
}

// defaultOf returns the plugin ID if path is
// plugins.<known plugin>.containerd.default_runtime_name.
func defaultOf(path []string) (string, bool) {
	if len(path) != 4 || path[0] != "plugins" || !knownPlugin(path[1]) ||
		path[2] != "containerd" || path[3] != "default_runtime_name" {
		return "", false
	}
	return path[1], true
}
