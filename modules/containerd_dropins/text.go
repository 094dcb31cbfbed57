package containerddropins

import (
	"fmt"
	"sort"
	"strings"

	"nodeconverge/modules/containerd/ctrconf"
)

// undecidableText says which paths containerd refuses and what to do.
func undecidableText(und []ctrconf.Undecidable) string {
	var b strings.Builder
	b.WriteString("not decidable now: containerd refuses this config tree, so no drop-in can be measured and nothing is moved:")
	repairable := false
	for _, u := range und {
		fmt.Fprintf(&b, "\n  %s %s", u.Path, u.Why)
		repairable = repairable || u.Parse
	}
	if repairable {
		b.WriteString("\na file that does not parse may be repaired by a later task (containerd_nvidia repairs duplicated nvidia tables); run containerd_dropins again after it")
	}
	for _, u := range und {
		if !u.Parse {
			b.WriteString("\na path containerd cannot read as a file stops the daemon from starting (containerd 2.x's config dump ignores it and every file after it): remove or replace it")
			break
		}
	}
	return b.String()
}

// notAccepted drops the keys the play accepts staying out of effect.
func notAccepted(a *Args, ls []ctrconf.LostKey) []ctrconf.LostKey {
	var out []ctrconf.LostKey
	for _, l := range ls {
		if !a.accepted(l.Key) {
			out = append(out, l)
		}
	}
	return out
}

// groupByFile splits lost keys by the file that writes them, keeping order.
func groupByFile(ls []ctrconf.LostKey) [][]ctrconf.LostKey {
	var out [][]ctrconf.LostKey
	idx := map[string]int{}
	for _, l := range ls {
		i, ok := idx[l.File]
		if !ok {
			i = len(out)
			idx[l.File] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], l)
	}
	return out
}

func keyNames(ls []ctrconf.LostKey) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Key
	}
	return out
}

// lostKeysText groups hidden values by the file that writes them and the
// file that hides them, once per group, the values as TOML.
func lostKeysText(ls []ctrconf.LostKey) string {
	type group struct {
		head string
		keys []string
		vals map[string]string
	}
	var groups []*group
	idx := map[string]*group{}
	for _, l := range ls {
		head := fmt.Sprintf("written in %s, %s:", l.File, l.Reason)
		g := idx[head]
		if g == nil {
			g = &group{head: head, vals: map[string]string{}}
			idx[head] = g
			groups = append(groups, g)
		}
		g.keys = append(g.keys, l.Key)
		g.vals[l.Key] = l.Written
	}
	var b []string
	for _, g := range groups {
		b = append(b, "    "+g.head)
		b = append(b, ctrconf.RenderTOML(g.keys, g.vals, "      "))
	}
	return strings.Join(b, "\n")
}

// lostText shows what moving a file would lose, as TOML.
func lostText(ls []lostValue) string {
	keys := make([]string, len(ls))
	vals := map[string]string{}
	for i, l := range ls {
		keys[i] = l.key
		vals[l.key] = l.with
		if ctrconf.Redact(l.key) {
			vals[l.key] = ctrconf.Redacted
		}
	}
	return ctrconf.RenderTOML(keys, vals, "      ")
}

// others is files without p.
func others(files []string, p string) []string {
	var out []string
	for _, f := range files {
		if f != p {
			out = append(out, f)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
