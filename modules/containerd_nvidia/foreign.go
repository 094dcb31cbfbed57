package containerdnvidia

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"nodeconverge/modules/containerd/ctrconf"
	"nodeconverge/modules/containerd/runtimeopts"
)

// Issue 28 #4: a runtime that has one of the managed names but is another
// runtime (gVisor's documented GPU setup names its runsc handler `nvidia`)
// is not this module's. Rewriting it as runc with the toolkit's BinaryName
// passes every gate and silently runs every `runtimeClassName: nvidia` pod
// on the host kernel instead of in the sandbox. Such a runtime is refused,
// naming what it is, unless the play says to replace it (replace_foreign).
// A rebuild of a runtime that is the module's keeps the operator's own
// fields of its table (Bottlerocket's base_runtime_spec on its default
// nvidia runtime): only runtime_type and BinaryName are the module's.

// runcTypes are the shims a runc-based runtime (NVIDIA's is one) runs under.
var runcTypes = []string{"", "io.containerd.runc.v2", "io.containerd.runc.v1", "io.containerd.runtime.v1.linux"}

// knownShims names the runtime a shim belongs to, for the message.
var knownShims = map[string]string{
	"io.containerd.runsc.v1":       "gVisor (runsc)",
	"io.containerd.kata.v2":        "Kata Containers",
	"io.containerd.kata-qemu.v2":   "Kata Containers (QEMU)",
	"io.containerd.kata-fc.v2":     "Kata Containers (Firecracker)",
	"io.containerd.kata-clh.v2":    "Kata Containers (Cloud Hypervisor)",
	"io.containerd.runhcs.v1":      "hcsshim (Windows)",
	"io.containerd.spin.v2":        "Spin (WebAssembly)",
	"io.containerd.wasmtime.v1":    "wasmtime (WebAssembly)",
	"io.containerd.wasmedge.v1":    "WasmEdge (WebAssembly)",
	"io.containerd.youki.v1":       "youki",
	"io.containerd.firecracker.v1": "firecracker-containerd",
	"io.containerd.sysbox-runc.v2": "Sysbox",
	"io.containerd.crun.v2":        "crun",
}

// foreignRuntime says why the runtime table rt of a managed name is another
// runtime ("" when it is runc-based with runc's options).
func foreignRuntime(rt map[string]any) string {
	typ, _ := rt["runtime_type"].(string)
	opts, _ := rt["options"].(map[string]any)
	var odd []string
	for k := range opts {
		if !slices.ContainsFunc(runtimeopts.RuncFields, func(f string) bool { return strings.EqualFold(f, k) }) {
			odd = append(odd, k)
		}
	}
	sort.Strings(odd)
	if slices.Contains(runcTypes, typ) && len(odd) == 0 {
		return ""
	}
	var why []string
	if !slices.Contains(runcTypes, typ) {
		w := "runtime_type " + typ
		if name := knownShims[typ]; name != "" {
			w += ", which is " + name
		}
		why = append(why, w)
	}
	if len(odd) > 0 {
		why = append(why, "options "+strings.Join(odd, ", ")+" that runc's shim does not have")
	}
	return strings.Join(why, "; ")
}

// foreignManaged lists the managed runtimes that are another runtime, in
// the live dump or in any loaded file that writes them.
func foreignManaged(tree *ctrconf.Tree, base *ctrconf.Effective, major int, names []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(name, where, why string) {
		if why != "" && !seen[name+where] {
			seen[name+where] = true
			out = append(out, fmt.Sprintf("runtime %q in %s has %s", name, where, why))
		}
	}
	if base != nil && base.OK {
		rts := runtimesOf(base, major)
		for _, n := range names {
			if rt, ok := rts[n]; ok {
				add(n, "the effective config", foreignRuntime(rt))
			}
		}
	}
	for i := range tree.Files {
		f := &tree.Files[i]
		if f.Missing || !f.Parses {
			continue
		}
		for _, n := range names {
			for _, p := range []string{ctrconf.CRIPlugin, ctrconf.CRIRuntimePlugin} {
				v, ok := f.Value(ctrconf.JoinKey("plugins", p, "containerd", "runtimes", n))
				if rt, isMap := v.(map[string]any); ok && isMap {
					add(n, f.Path, foreignRuntime(rt))
				}
			}
		}
	}
	return out
}

// ownFields are the fields of runtime name's table that the loaded files
// write, later files winning, without runtime_type, options and zero
// values: what a rebuild keeps. A field 2.x renamed (sandbox_mode ->
// sandboxer) is spelled for layout.
func ownFields(tree *ctrconf.Tree, name string, layout int) map[string]any {
	out := map[string]any{}
	for i := range tree.Files {
		f := &tree.Files[i]
		if f.Missing || !f.Parses {
			continue
		}
		for _, p := range []string{ctrconf.CRIPlugin, ctrconf.CRIRuntimePlugin} {
			v, ok := f.Value(ctrconf.JoinKey("plugins", p, "containerd", "runtimes", name))
			rt, isMap := v.(map[string]any)
			if !ok || !isMap {
				continue
			}
			for k, fv := range rt {
				if k == "runtime_type" || k == "options" || isZero(fv) {
					continue
				}
				if _, nested := fv.(map[string]any); nested {
					continue
				}
				if layout >= 3 && k == "sandbox_mode" {
					k = "sandboxer"
				} else if layout < 3 && k == "sandboxer" {
					k = "sandbox_mode"
				}
				out[k] = fv
			}
		}
	}
	return out
}
