package cri

import (
	"encoding/json"
	"fmt"
	"sort"
)

// daemonConfig is what the verbose CRI status says of the runtime handlers:
// its "config" entry, the CRI plugin's configuration as the daemon holds it
// (containerd 1.6, 1.7 and 2.x all report containerd.runtimes there; 1.x
// also its sandboxImage, 2.x keeps that in the images plugin).
type daemonConfig struct {
	Containerd struct {
		DefaultRuntimeName string `json:"defaultRuntimeName"`
		Runtimes           map[string]struct {
			RuntimeType string         `json:"runtimeType"`
			Options     map[string]any `json:"options"`
		} `json:"runtimes"`
	} `json:"containerd"`
	SandboxImage string `json:"sandboxImage"`
}

// applyConfig fills r from the daemon's "config" status entry.
func (r *Report) applyConfig(raw []byte) error {
	var cfg daemonConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("read the daemon's CRI config from its status: %w", err)
	}
	r.DefaultRuntime = cfg.Containerd.DefaultRuntimeName
	if cfg.SandboxImage != "" {
		r.SandboxImage = cfg.SandboxImage
	}
	r.Loaded = r.Loaded[:0]
	for n := range cfg.Containerd.Runtimes {
		r.Loaded = append(r.Loaded, n)
	}
	sort.Strings(r.Loaded)
	r.config = map[string]*Handler{}
	for n, rt := range cfg.Containerd.Runtimes {
		opts := map[string]any{}
		for k, v := range rt.Options {
			// The daemon prints every field of its options type; the
			// zero ones are noise next to what a config set.
			if !zero(v) {
				opts[k] = v
			}
		}
		r.config[n] = &Handler{Name: n, Loaded: true, RuntimeType: rt.RuntimeType, Options: opts}
	}
	return nil
}

func zero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// handlers makes the list of handlers to prove, each with the daemon's
// view of it; one the daemon does not report fails at once.
func (r *Report) handlers(want []string) {
	for _, n := range expected(want, r.DefaultRuntime) {
		h := &Handler{Name: n, Status: Unproven}
		if c, ok := r.config[n]; ok {
			h.Loaded, h.RuntimeType, h.Options = true, c.RuntimeType, c.Options
		} else if r.config != nil {
			h.Status = Failed
			h.Reason = fmt.Sprintf("the running containerd has no runtime handler %q (it loaded: %s)", n, list(r.Loaded))
		}
		r.Handlers = append(r.Handlers, h)
	}
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
