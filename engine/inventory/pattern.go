package inventory

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Select returns the hosts matching an Ansible host pattern, in inventory
// order and without duplicates. Parts are separated by ',' or ':'; a part
// may be a group or host name, a glob ("omen*", "node0?"), a regex
// ("~nuc\d"), and may carry a subscript ("gpu[0]", "gpu[0:1]"). As in
// Ansible, unions are applied first, then "&" intersections, then "!"
// exclusions, whatever order they were written in.
func (inv *Inventory) Select(pattern string) ([]*Host, error) {
	parts := splitPattern(pattern)
	if len(parts) == 0 {
		return nil, fmt.Errorf("empty host pattern %q", pattern)
	}
	var union, inter, excl []string
	for _, p := range parts {
		switch p[0] {
		case '!':
			excl = append(excl, p[1:])
		case '&':
			inter = append(inter, p[1:])
		default:
			union = append(union, p)
		}
	}
	if len(union) == 0 {
		union = []string{"all"}
	}
	selected := map[string]bool{}
	for _, p := range union {
		hosts, err := inv.matchOne(p)
		if err != nil {
			return nil, err
		}
		for _, h := range hosts {
			selected[h] = true
		}
	}
	for _, p := range inter {
		hosts, err := inv.matchOne(p)
		if err != nil {
			return nil, err
		}
		keep := map[string]bool{}
		for _, h := range hosts {
			keep[h] = true
		}
		for h := range selected {
			if !keep[h] {
				delete(selected, h)
			}
		}
	}
	for _, p := range excl {
		hosts, err := inv.matchOne(p)
		if err != nil {
			return nil, err
		}
		for _, h := range hosts {
			delete(selected, h)
		}
	}
	var out []*Host
	for _, name := range inv.Order {
		if selected[name] {
			out = append(out, inv.Hosts[name])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no hosts matched pattern %q", pattern)
	}
	return out, nil
}

// splitPattern splits on ',' and on ':' outside brackets, so "gpu[0:1]"
// stays one part.
func splitPattern(pattern string) []string {
	var parts []string
	depth := 0
	start := 0
	flush := func(end int) {
		if p := strings.TrimSpace(pattern[start:end]); p != "" {
			parts = append(parts, p)
		}
	}
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ',', ':':
			if depth == 0 {
				flush(i)
				start = i + 1
			}
		}
	}
	flush(len(pattern))
	return parts
}

var subscriptRe = regexp.MustCompile(`^(.+)\[(?:(-?[0-9]+)|([0-9]*):([0-9]*))\]$`)

// matchOne evaluates one pattern part to host names, in the order Ansible
// would list them (groups first, then hosts), which matters for subscripts.
func (inv *Inventory) matchOne(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("empty part in host pattern")
	}
	base := p
	var sub []string
	if p[0] != '~' {
		if m := subscriptRe.FindStringSubmatch(p); m != nil {
			base, sub = m[1], m[2:]
		}
	}
	match, isPattern, err := matcher(base)
	if err != nil {
		return nil, err
	}
	var hosts []string
	seen := map[string]bool{}
	add := func(h string) {
		if !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	groupMatched := false
	for _, g := range sortedGroupNames(inv) {
		if match(g) {
			groupMatched = true
			for _, h := range inv.groupHosts(g) {
				add(h)
			}
		}
	}
	if !groupMatched || isPattern {
		for _, h := range inv.Order {
			if match(h) {
				add(h)
			}
		}
	}
	if sub != nil {
		return applySubscript(hosts, sub)
	}
	return hosts, nil
}

func applySubscript(hosts []string, sub []string) ([]string, error) {
	n := len(hosts)
	if sub[0] != "" {
		i, err := strconv.Atoi(sub[0])
		if err != nil {
			return nil, fmt.Errorf("bad subscript [%s]: %w", sub[0], err)
		}
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return nil, nil
		}
		return hosts[i : i+1], nil
	}
	start, end := 0, n-1
	if sub[1] != "" {
		v, err := strconv.Atoi(sub[1])
		if err != nil {
			return nil, fmt.Errorf("bad subscript start %q: %w", sub[1], err)
		}
		start = v
	}
	if sub[2] != "" {
		v, err := strconv.Atoi(sub[2])
		if err != nil {
			return nil, fmt.Errorf("bad subscript end %q: %w", sub[2], err)
		}
		end = v
	}
	if end > n-1 {
		end = n - 1
	}
	if start >= n || start > end {
		return nil, nil
	}
	return hosts[start : end+1], nil
}

// sortedGroupNames lists groups in a stable order: all first, then the
// order groups were linked under all, depth first.
func sortedGroupNames(inv *Inventory) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(string)
	walk = func(g string) {
		if seen[g] {
			return
		}
		seen[g] = true
		out = append(out, g)
		if grp, ok := inv.Groups[g]; ok {
			for _, c := range grp.Children {
				walk(c)
			}
		}
	}
	walk("all")
	return out
}

// groupHosts lists a group's hosts and its descendants' hosts.
func (inv *Inventory) groupHosts(name string) []string {
	if name == "all" {
		return inv.Order
	}
	var out []string
	seenHost := map[string]bool{}
	seenGroup := map[string]bool{}
	var walk func(string)
	walk = func(g string) {
		if seenGroup[g] {
			return
		}
		seenGroup[g] = true
		grp, ok := inv.Groups[g]
		if !ok {
			return
		}
		for _, h := range grp.Hosts {
			if !seenHost[h] {
				seenHost[h] = true
				out = append(out, h)
			}
		}
		for _, c := range grp.Children {
			walk(c)
		}
	}
	walk(name)
	return out
}

// matcher compiles one pattern part: "~regex", a glob with * ? [ ], or an
// exact name. "*" alone means all.
func matcher(p string) (func(string) bool, bool, error) {
	if strings.HasPrefix(p, "~") {
		re, err := regexp.Compile(p[1:])
		if err != nil {
			return nil, false, fmt.Errorf("bad regex in host pattern %q: %w", p, err)
		}
		return func(s string) bool { return re.MatchString(s) }, true, nil
	}
	if !strings.ContainsAny(p, "*?[") {
		return func(s string) bool { return s == p }, false, nil
	}
	re, err := regexp.Compile(globToRegexp(p))
	if err != nil {
		return nil, false, fmt.Errorf("bad glob in host pattern %q: %w", p, err)
	}
	return re.MatchString, true, nil
}

// globToRegexp translates fnmatch syntax, as Python's fnmatch.translate.
func globToRegexp(p string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := i + 1
			if j < len(p) && p[j] == '!' {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			for j < len(p) && p[j] != ']' {
				j++
			}
			if j >= len(p) {
				b.WriteString(`\[`)
				continue
			}
			class := p[i+1 : j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			class = strings.ReplaceAll(class, `\`, `\\`)
			b.WriteString("[" + class + "]")
			i = j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return b.String()
}
