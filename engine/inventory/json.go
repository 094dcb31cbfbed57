package inventory

import (
	"encoding/json"
	"fmt"
	"math"
)

// magicVars are added to Host.Vars for templates but are not inventory
// vars, so `ansible-inventory --list` does not show them.
var magicVars = map[string]bool{"inventory_hostname": true, "group_names": true}

// ListJSON renders the inventory as `ansible-inventory --list` does: every
// group that has hosts or children, "all" with its children, and the merged
// vars of every host that has any under _meta.hostvars. An inline
// vaulted value is shown as {"__ansible_vault": envelope}, as
// ansible-inventory shows it; a value from a vault-encrypted vars file is
// shown decrypted, as ansible-inventory shows it too.
func (inv *Inventory) ListJSON() ([]byte, error) {
	out := map[string]any{}
	hostvars := map[string]any{}
	for _, name := range inv.Order {
		h := inv.Hosts[name]
		src := h.Vars
		if h.list != nil {
			// Inline vaulted values as ansible-inventory prints them:
			// the envelope, never the plaintext.
			src = h.list
		}
		vars := map[string]any{}
		for k, v := range src {
			if !magicVars[k] {
				vars[k] = v
			}
		}
		if len(vars) > 0 {
			hostvars[name] = jsonSafe(vars, 0)
		}
	}
	out["_meta"] = map[string]any{"hostvars": hostvars}
	for name, g := range inv.Groups {
		entry := map[string]any{}
		if name != "all" && len(g.Hosts) > 0 {
			entry["hosts"] = g.Hosts
		}
		if len(g.Children) > 0 {
			entry["children"] = g.Children
		}
		if len(entry) > 0 {
			out[name] = entry
		}
	}
	b, err := json.MarshalIndent(out, "", "    ")
	if err != nil {
		return nil, fmt.Errorf("marshal inventory %s: %w", inv.Path, err)
	}
	return b, nil
}

// jsonSafe replaces what encoding/json refuses (YAML's .nan and .inf) with
// the text Python's json module would print, and leaves vars unchanged.
func jsonSafe(v any, depth int) any {
	if depth > 100 {
		return fmt.Sprint(v)
	}
	switch t := v.(type) {
	case float64:
		switch {
		case math.IsNaN(t):
			return "NaN"
		case math.IsInf(t, 1):
			return "Infinity"
		case math.IsInf(t, -1):
			return "-Infinity"
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = jsonSafe(e, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = jsonSafe(e, depth+1)
		}
		return out
	}
	return v
}
