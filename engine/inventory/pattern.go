package inventory

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"nodeconverge/engine/fnmatch"
	"nodeconverge/engine/inputs"
)

// Select returns the hosts matching an Ansible host pattern, in the order
// Ansible lists them, without duplicates. It follows Ansible's
// InventoryManager: parts are separated by "," (or, when there is no
// comma and the whole is not one host address, by ":"); a part is a group
// or host name, a glob ("omen*", "node0?"), or a regex ("~nuc\d", matched
// from the start of the name as Python's re.match, not anchored at the
// end), optionally followed by a subscript ("gpu[0]", "gpu[-1]",
// "gpu[1:3]", "gpu[1:]"). Plain parts are applied first, then "&"
// intersections, then "!" exclusions, whatever order they were written in.
//
// Where Ansible would only warn, Select refuses: the removed subscript
// form "g[1-3]" is an error (Ansible warns, then reads it as [1:3] of the
// hosts matching "g"), and so is a pattern matching no host at all.
func (inv *Inventory) Select(pattern string) ([]*Host, error) {
	parts := SplitPattern(pattern)
	if len(parts) == 0 {
		return nil, fmt.Errorf("empty host pattern %q", pattern)
	}
	return inv.hostsOf(parts, "pattern", pattern)
}

// hostsOf evaluates the parts of a pattern (what it is, for the error)
// to their hosts, refusing a selection of none.
func (inv *Inventory) hostsOf(parts []string, what, pattern string) ([]*Host, error) {
	names, err := inv.evaluate(parts)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no hosts matched %s %q", what, pattern)
	}
	out := make([]*Host, len(names))
	for i, n := range names {
		out[i] = inv.Hosts[n]
	}
	return out, nil
}

// SplitPattern splits a host pattern into its parts as Ansible's
// split_host_pattern does: on "," when there is one; else the whole is
// one part when it reads as one host address (a name, an IPv4 or IPv6
// address, with ranges and an optional :port); else on ":" outside
// brackets.
func SplitPattern(pattern string) []string {
	var parts []string
	if strings.Contains(pattern, ",") {
		parts = strings.Split(pattern, ",")
	} else if isAddress(pattern) {
		parts = []string{pattern}
	} else {
		parts = colonSplit.FindAllString(pattern, -1)
	}
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

var colonSplit = regexp.MustCompile(`(?:[^\s:\[\]]|\[[^\]]*\])+`)

// evaluate is Ansible's _evaluate_patterns.
func (inv *Inventory) evaluate(parts []string) ([]string, error) {
	var regular, inter, excl []string
	for _, p := range parts {
		switch p[0] {
		case '!':
			excl = append(excl, p)
		case '&':
			inter = append(inter, p)
		default:
			regular = append(regular, p)
		}
	}
	if len(regular) == 0 {
		regular = []string{"all"}
	}
	var hosts []string
	for _, p := range append(append(regular, inter...), excl...) {
		if _, ok := inv.Hosts[p]; ok {
			hosts = append(hosts, p)
			continue
		}
		that, err := inv.matchOne(p)
		if err != nil {
			return nil, err
		}
		set := make(map[string]bool, len(that))
		for _, h := range that {
			set[h] = true
		}
		switch p[0] {
		case '!':
			hosts = filter(hosts, func(h string) bool { return !set[h] })
		case '&':
			hosts = filter(hosts, func(h string) bool { return set[h] })
		default:
			existing := make(map[string]bool, len(hosts))
			for _, h := range hosts {
				existing[h] = true
			}
			for _, h := range that {
				if !existing[h] {
					hosts = append(hosts, h)
				}
			}
		}
	}
	return dedupe(hosts), nil
}

func filter(list []string, keep func(string) bool) []string {
	var out []string
	for _, x := range list {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func dedupe(list []string) []string {
	seen := make(map[string]bool, len(list))
	var out []string
	for _, x := range list {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// subscriptRe is Ansible's PATTERN_WITH_SUBSCRIPT.
var subscriptRe = regexp.MustCompile(`^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$`)

// matchOne is Ansible's _match_one_pattern: one part without its & or !,
// split from its subscript, matched, then subscripted. Its result may
// hold a host twice (a group's and a name match), as Ansible's does,
// which a subscript counts.
func (inv *Inventory) matchOne(p string) ([]string, error) {
	if p[0] == '&' || p[0] == '!' {
		p = p[1:]
	}
	if p == "" {
		return nil, fmt.Errorf("empty part in host pattern")
	}
	expr := p
	var m []string
	if p[0] != '~' {
		m = subscriptRe.FindStringSubmatch(p)
	}
	if m != nil {
		expr = m[1]
		if m[4] == "-" {
			return nil, fmt.Errorf("host pattern %q: [%s-%s] is the subscript form Ansible removed (it warns, then takes hosts %s to %s of %q): write %s[%s:%s] for those, or a regex such as ~%s[%s-%s] to match names",
				p, m[3], m[5], m[3], m[5], expr, expr, m[3], m[5], regexp.QuoteMeta(expr), m[3], m[5])
		}
	}
	hosts, err := inv.enumerate(expr)
	if err != nil {
		return nil, err
	}
	if m == nil || len(hosts) == 0 {
		return hosts, nil
	}
	n := len(hosts)
	if m[2] != "" {
		i, err := strconv.Atoi(m[2])
		if err != nil {
			return nil, fmt.Errorf("host pattern %q: bad subscript: %w", p, err)
		}
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return nil, fmt.Errorf("no hosts matched the subscripted pattern %q: it has %d hosts", p, n)
		}
		return hosts[i : i+1], nil
	}
	start, err := strconv.Atoi(m[3])
	if err != nil {
		return nil, fmt.Errorf("host pattern %q: bad subscript: %w", p, err)
	}
	end := -1
	if m[5] != "" {
		if end, err = strconv.Atoi(m[5]); err != nil {
			return nil, fmt.Errorf("host pattern %q: bad subscript: %w", p, err)
		}
	}
	// Python: hosts[start:end+1], and [x:0] takes hosts[x] alone.
	if end == 0 {
		if start >= n {
			return nil, fmt.Errorf("no hosts matched the subscripted pattern %q: it has %d hosts", p, n)
		}
		return hosts[start : start+1], nil
	}
	if end == -1 {
		end = n - 1
	}
	start, end = min(start, n), min(end+1, n)
	if start >= end {
		return nil, nil
	}
	return hosts[start:end], nil
}

// enumerate is Ansible's _enumerate_matches: the hosts of every group the
// pattern matches (groups in creation order, "all" and "ungrouped"
// included), then, when no group matched or the pattern is a regex or has
// one of . ? * [, the hosts whose names match.
func (inv *Inventory) enumerate(pattern string) ([]string, error) {
	match, err := matcher(pattern)
	if err != nil {
		return nil, err
	}
	var out []string
	matched := false
	for _, g := range inv.groupOrder {
		if match(g) {
			matched = true
			out = append(out, inv.groupHosts(g)...)
		}
	}
	if !matched || pattern[0] == '~' || strings.ContainsAny(pattern, ".?*[") {
		for _, h := range inv.Order {
			if match(h) {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

// groupHosts lists a group's hosts as Ansible's Group.get_hosts does:
// the group's own hosts, then its children's, level by level (breadth
// first), each host once.
func (inv *Inventory) groupHosts(name string) []string {
	grp, ok := inv.Groups[name]
	if !ok {
		return nil
	}
	ordered := []*Group{grp}
	seen := map[string]bool{name: true}
	level := []*Group{grp}
	for len(level) > 0 {
		var next []*Group
		for _, g := range level {
			for _, c := range g.Children {
				if seen[c] {
					continue
				}
				seen[c] = true
				if cg, ok := inv.Groups[c]; ok {
					ordered = append(ordered, cg)
					next = append(next, cg)
				}
			}
		}
		level = next
	}
	var out []string
	seenHost := map[string]bool{}
	for _, g := range ordered {
		for _, h := range g.Hosts {
			if !seenHost[h] {
				seenHost[h] = true
				out = append(out, h)
			}
		}
	}
	return out
}

// matcher compiles one pattern part as Ansible's _match_list: "~regex"
// matched from the start of the name (re.match: anchored at the start
// only), anything else through fnmatch (a name without * ? [ matches only
// itself).
func matcher(p string) (func(string) bool, error) {
	if strings.HasPrefix(p, "~") {
		re, err := regexp.Compile(`^(?:` + p[1:] + `)`)
		if err != nil {
			return nil, fmt.Errorf("bad regex in host pattern %q: %w", p, err)
		}
		return re.MatchString, nil
	}
	if !strings.ContainsAny(p, "*?[") {
		return func(s string) bool { return s == p }, nil
	}
	re, err := regexp.Compile(fnmatch.Translate(p))
	if err != nil {
		return nil, fmt.Errorf("bad glob in host pattern %q: %w", p, err)
	}
	return re.MatchString, nil
}

// LimitSet is the names of the hosts a --limit selects (SelectLimit), for
// filtering each play's hosts; nil when limit is "" (no limit). Errors
// say "--limit".
func (inv *Inventory) LimitSet(limit string) (map[string]bool, error) {
	if limit == "" {
		return nil, nil
	}
	hs, err := inv.SelectLimit(limit)
	if err != nil {
		return nil, fmt.Errorf("--limit: %w", err)
	}
	set := make(map[string]bool, len(hs))
	for _, h := range hs {
		set[h.Name] = true
	}
	return set, nil
}

// SelectLimit returns the hosts a --limit selects, as Ansible's subset
// does: Select's pattern language, plus "@FILE" parts whose file holds
// one pattern per line (blank lines skipped).
func (inv *Inventory) SelectLimit(limit string) ([]*Host, error) {
	var parts []string
	for _, p := range SplitPattern(limit) {
		if p[0] != '@' {
			parts = append(parts, p)
			continue
		}
		lines, err := limitFile(p[1:])
		if err != nil {
			return nil, err
		}
		parts = append(parts, lines...)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("empty limit %q", limit)
	}
	return inv.hostsOf(parts, "limit", limit)
}

// maxLimitFile bounds a --limit @FILE.
const maxLimitFile = 4 << 20

// limitFile reads a --limit @FILE: one pattern per line, each taken
// whole (a line is not split at "," or ":").
func limitFile(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("limit file: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("limit @%s must be a file, not a directory", path)
	}
	data, err := inputs.ReadFile(path, "limit file", maxLimitFile)
	if err != nil {
		return nil, fmt.Errorf("read limit file %s: %w", path, err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}
