// Package inventory reads Ansible-compatible YAML inventories: groups with
// hosts, children and vars, plus group_vars/ and host_vars/ beside the file,
// merged with Ansible's precedence. It also selects hosts with Ansible's
// pattern language (--limit, a play's hosts:).
//
// Every problem in a file is reported as an *Error naming file:line:col, and
// no input makes the loader panic.
package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/inputs"
	"nodeconverge/engine/yamlx"
)

// ConnInfo is how to reach a host, derived from its ansible_* vars.
type ConnInfo struct {
	Address    string // ansible_host, default the inventory name
	Port       int    // ansible_port, default 22
	User       string // ansible_user, "" lets the transport decide
	KeyFile    string // ansible_ssh_private_key_file
	Become     bool   // ansible_become
	BecomeUser string // ansible_become_user
	ProxyJump  string // parsed out of CommonArgs ("-o ProxyJump=…" or "-J …")
	CommonArgs string // ansible_ssh_common_args, verbatim
	// Connection is ansible_connection as written, "" when unset; the
	// caller maps it onto a transport (ssh, local) and refuses the rest.
	Connection string
}

// Host is one inventory host with its vars already merged.
type Host struct {
	Name string
	// Vars are the merged vars, as `ansible-inventory --list` shows them,
	// plus the magic vars inventory_hostname and group_names so templates
	// can use them as in Ansible.
	Vars map[string]any
	// Groups lists every group containing the host, including ancestors
	// and "all", sorted.
	Groups []string
	Conn   ConnInfo
}

// Group is one inventory group.
type Group struct {
	Name     string
	Hosts    []string // hosts listed directly in the group, in file order
	Children []string // child groups, in file order
	// Vars are the group's own vars: the inventory file's, overridden by
	// group_vars/<name>.
	Vars map[string]any
}

// Inventory is a loaded inventory.
type Inventory struct {
	Path   string
	Hosts  map[string]*Host
	Order  []string // hosts in first-seen order
	Groups map[string]*Group
}

// The largest host range ("node[0001:9999]") expanded, so a typo cannot
// make the loader allocate without bound.
const maxRange = 10000

// maxWork bounds group definitions visited, which aliases can multiply.
const maxWork = 10000

type loader struct {
	file       string
	inv        *Inventory
	groupOrder []string                  // group creation order
	parents    map[string][]string       // group -> parent groups
	invVars    map[string]map[string]any // group -> inventory-file vars
	fileVars   map[string]map[string]any // group -> group_vars/ vars
	hostInv    map[string]map[string]any // host -> inventory-file vars
	hostFile   map[string]map[string]any // host -> host_vars/ vars
	hostGroups map[string][]string       // host -> groups listing it directly
	priority   map[string]int            // ansible_group_priority, default 1
	work       int
}

// Load reads an inventory file and the group_vars/ and host_vars/
// directories beside it.
func Load(path string) (*Inventory, error) {
	data, err := inputs.ReadFile(path, "inventory", inputs.MaxInventory)
	if err != nil {
		return nil, fmt.Errorf("read inventory %s: %w", path, err)
	}
	return load(path, data)
}

// load parses inventory text that was read from path; group_vars/ and
// host_vars/ are looked up beside path.
func load(path string, data []byte) (*Inventory, error) {
	l := &loader{
		file:       path,
		inv:        &Inventory{Path: path, Hosts: map[string]*Host{}, Groups: map[string]*Group{}},
		parents:    map[string][]string{},
		invVars:    map[string]map[string]any{},
		fileVars:   map[string]map[string]any{},
		hostInv:    map[string]map[string]any{},
		hostFile:   map[string]map[string]any{},
		hostGroups: map[string][]string{},
		priority:   map[string]int{},
	}
	// Ansible creates these two before reading anything, which fixes
	// "ungrouped" as the first child of "all".
	l.group("all")
	l.group("ungrouped")
	l.inv.Groups["all"].Children = []string{"ungrouped"}
	l.parents["ungrouped"] = []string{"all"}

	doc, err := parseYAML(path, data)
	if err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, &Error{File: path, Line: 1, Col: 1, Msg: "inventory is empty: expected a mapping of groups, usually starting with `all:`"}
	}
	root := yamlx.Deref(doc.Content[0])
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, nodeErr(path, doc.Content[0], "inventory must be a mapping of group names (usually `all:`), got %s", yamlx.KindName(root))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		name, err := l.keyName(k, seen, "group")
		if err != nil {
			return nil, err
		}
		if contains(groupKeys, name) {
			// Ansible would make a group called "hosts"; that is never
			// what was meant.
			return nil, nodeErr(path, k, "top-level key %q is a group keyword, not a group: put it under a group such as `all:`", name)
		}
		if err := l.parseGroup(name, k, root.Content[i+1]); err != nil {
			return nil, err
		}
	}
	if err := l.loadVarsDirs(); err != nil {
		return nil, err
	}
	l.finish()
	return l.inv, nil
}

// keyName checks that a mapping key is a plain string that was not seen
// before in the same mapping.
func (l *loader) keyName(k *yaml.Node, seen map[string]bool, what string) (string, error) {
	k = yamlx.Deref(k)
	if k == nil || k.Kind != yaml.ScalarNode || k.Value == "" {
		return "", nodeErr(l.file, k, "%s name must be a non-empty string, got %s", what, yamlx.KindName(k))
	}
	if seen[k.Value] {
		return "", nodeErr(l.file, k, "duplicate key %q", k.Value)
	}
	seen[k.Value] = true
	return k.Value, nil
}

func (l *loader) group(name string) *Group {
	g, ok := l.inv.Groups[name]
	if !ok {
		g = &Group{Name: name, Vars: map[string]any{}}
		l.inv.Groups[name] = g
		l.groupOrder = append(l.groupOrder, name)
	}
	return g
}

var groupKeys = []string{"children", "hosts", "vars"}

func (l *loader) parseGroup(name string, at, n *yaml.Node) error {
	l.work++
	if l.work > maxWork {
		return nodeErr(l.file, at, "inventory too large (more than %d group definitions, aliases included)", maxWork)
	}
	g := l.group(name)
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return nodeErr(l.file, n, "group %q must be a mapping with hosts, children or vars, got %s", name, yamlx.KindName(v))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		key, err := l.keyName(k, seen, "key")
		if err != nil {
			return err
		}
		switch key {
		case "vars":
			vars, err := l.varsMapping(l.file, val, fmt.Sprintf("vars of group %q", name))
			if err != nil {
				return err
			}
			if l.invVars[name] == nil {
				l.invVars[name] = map[string]any{}
			}
			for k, x := range vars {
				if k == "ansible_group_priority" {
					// As in Ansible, this orders the group and is
					// not a var itself.
					p, err := toInt(x)
					if err != nil {
						return nodeErr(l.file, val, "vars of group %q: ansible_group_priority must be an integer, got %v", name, x)
					}
					l.priority[name] = p
					continue
				}
				l.invVars[name][k] = x
			}
		case "hosts":
			if err := l.parseHosts(g, val); err != nil {
				return err
			}
		case "children":
			if err := l.parseChildren(g, val); err != nil {
				return err
			}
		default:
			return nodeErr(l.file, k, "unknown key %q in group %q: only hosts, children and vars are allowed%s", key, name, yamlx.DidYouMean(key, groupKeys))
		}
	}
	return nil
}

func (l *loader) parseHosts(g *Group, n *yaml.Node) error {
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return nil
	}
	if v.Kind == yaml.SequenceNode {
		return nodeErr(l.file, n, "hosts of group %q must be a mapping of host names (each `name:` on its own line, vars optional), not a list", g.Name)
	}
	if v.Kind != yaml.MappingNode {
		return nodeErr(l.file, n, "hosts of group %q must be a mapping of host names, got %s", g.Name, yamlx.KindName(v))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		pattern, err := l.keyName(k, seen, "host")
		if err != nil {
			return err
		}
		vars, err := l.varsMapping(l.file, val, fmt.Sprintf("host %q", pattern))
		if err != nil {
			return err
		}
		names, port, err := expandHost(pattern)
		if err != nil {
			return nodeErr(l.file, k, "host %q: %v", pattern, err)
		}
		for _, h := range names {
			l.addHost(g, h)
			if port != 0 {
				l.hostInv[h]["ansible_port"] = port
			}
			for k, x := range vars {
				l.hostInv[h][k] = x
			}
		}
	}
	return nil
}

func (l *loader) addHost(g *Group, name string) {
	if _, ok := l.inv.Hosts[name]; !ok {
		l.inv.Hosts[name] = &Host{Name: name}
		l.inv.Order = append(l.inv.Order, name)
		l.hostInv[name] = map[string]any{}
	}
	for _, x := range g.Hosts {
		if x == name {
			return
		}
	}
	g.Hosts = append(g.Hosts, name)
	l.hostGroups[name] = append(l.hostGroups[name], g.Name)
}

func (l *loader) parseChildren(g *Group, n *yaml.Node) error {
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return nodeErr(l.file, n, "children of group %q must be a mapping of group names, got %s", g.Name, yamlx.KindName(v))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		child, err := l.keyName(k, seen, "group")
		if err != nil {
			return err
		}
		if child == "all" {
			return nodeErr(l.file, k, "group \"all\" cannot be a child of %q: every group is already in all", g.Name)
		}
		// The edge goes in before the child is read, so a cycle is
		// found before the recursion could follow it forever.
		if path := l.pathTo(child, g.Name); path != nil {
			return nodeErr(l.file, k, "group cycle: %s -> %s", strings.Join(path, " -> "), child)
		}
		l.group(child)
		if !contains(g.Children, child) {
			g.Children = append(g.Children, child)
			l.parents[child] = append(l.parents[child], g.Name)
		}
		if err := l.parseGroup(child, k, val); err != nil {
			return err
		}
	}
	return nil
}

// pathTo returns a chain of child edges from -> ... -> to, or nil.
func (l *loader) pathTo(from, to string) []string {
	if from == to {
		return []string{from}
	}
	visited := map[string]bool{}
	var walk func(string) []string
	walk = func(n string) []string {
		if n == to {
			return []string{n}
		}
		if visited[n] {
			return nil
		}
		visited[n] = true
		g, ok := l.inv.Groups[n]
		if !ok {
			return nil
		}
		for _, c := range g.Children {
			if p := walk(c); p != nil {
				return append([]string{n}, p...)
			}
		}
		return nil
	}
	return walk(from)
}

// varsMapping decodes a vars mapping and checks the connection vars whose
// type the loader relies on, while their positions are still known.
func (l *loader) varsMapping(file string, n *yaml.Node, what string) (map[string]any, error) {
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return map[string]any{}, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, nodeErr(file, n, "%s: vars must be a mapping, got %s", what, yamlx.KindName(v))
	}
	out := map[string]any{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := yamlx.Deref(v.Content[i]), v.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			return nil, nodeErr(file, v.Content[i], "%s: variable name must be a string, got %s", what, yamlx.KindName(k))
		}
		if k.Value == "<<" {
			// A YAML merge key: let yaml.v3 resolve it for the whole
			// mapping instead of treating "<<" as a variable.
			all, err := decodeValue(file, v)
			if err != nil {
				return nil, err
			}
			m, _ := all.(map[string]any)
			for mk, mv := range m {
				if _, ok := out[mk]; !ok {
					out[mk] = mv
				}
			}
			continue
		}
		if seen[k.Value] {
			return nil, nodeErr(file, k, "%s: duplicate variable %q", what, k.Value)
		}
		seen[k.Value] = true
		x, err := decodeValue(file, val)
		if err != nil {
			return nil, err
		}
		if err := checkConnVar(k.Value, x); err != nil {
			return nil, nodeErr(file, val, "%s: %v", what, err)
		}
		out[k.Value] = x
	}
	return out, nil
}

func checkConnVar(name string, v any) error {
	switch name {
	case "ansible_port", "ansible_ssh_port":
		if _, err := toPort(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	case "ansible_become":
		if _, err := toBool(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	case "ansible_host", "ansible_ssh_host", "ansible_user", "ansible_ssh_user", "ansible_become_user",
		"ansible_ssh_private_key_file", "ansible_private_key_file", "ansible_ssh_common_args", "ansible_connection":
		switch v.(type) {
		case string, int, float64:
		default:
			return fmt.Errorf("%s must be a string, got %v", name, v)
		}
	}
	return nil
}

func toPort(v any) (int, error) {
	var p int
	switch t := v.(type) {
	case int:
		p = t
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil {
			return 0, fmt.Errorf("port %q is not a number", t)
		}
		p = n
	default:
		return 0, fmt.Errorf("port must be a number, got %v", v)
	}
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %d out of range 1-65535", p)
	}
	return p, nil
}

func toBool(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case int:
		if t == 0 || t == 1 {
			return t == 1, nil
		}
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "yes", "true", "on", "1", "y":
			return true, nil
		case "no", "false", "off", "0", "n":
			return false, nil
		}
	}
	return false, fmt.Errorf("expected a boolean (true/false/yes/no), got %v", v)
}

var varsExts = []string{"", ".yml", ".yaml", ".json"}

// loadVarsDirs reads group_vars/ and host_vars/ beside the inventory, as
// Ansible's host_group_vars plugin does: <name>, <name>.yml, .yaml, .json,
// or a directory <name>/ whose files are read in name order.
func (l *loader) loadVarsDirs() error {
	dir := filepath.Dir(l.file)
	for _, name := range l.groupOrder {
		vars, err := l.readVarsFor(filepath.Join(dir, "group_vars"), name)
		if err != nil {
			return err
		}
		if vars != nil {
			l.fileVars[name] = vars
		}
	}
	for _, name := range l.inv.Order {
		vars, err := l.readVarsFor(filepath.Join(dir, "host_vars"), name)
		if err != nil {
			return err
		}
		if vars != nil {
			l.hostFile[name] = vars
		}
	}
	return nil
}

func (l *loader) readVarsFor(dir, name string) (map[string]any, error) {
	if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return nil, nil
	}
	var files []string
	for _, ext := range varsExts {
		p := filepath.Join(dir, name+ext)
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		if st.IsDir() {
			if ext != "" {
				continue
			}
			sub, err := varsDirFiles(p)
			if err != nil {
				return nil, err
			}
			files = append(files, sub...)
			continue
		}
		files = append(files, p)
	}
	if len(files) == 0 {
		return nil, nil
	}
	out := map[string]any{}
	for _, f := range files {
		data, err := inputs.ReadFile(f, "vars file", inputs.MaxVarsFile)
		if err != nil {
			return nil, fmt.Errorf("read vars file %s: %w", f, err)
		}
		doc, err := parseYAML(f, data)
		if err != nil {
			return nil, err
		}
		if len(doc.Content) == 0 {
			continue
		}
		vars, err := l.varsMapping(f, doc.Content[0], "vars file")
		if err != nil {
			return nil, err
		}
		for k, v := range vars {
			out[k] = v
		}
	}
	return out, nil
}

func varsDirFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") || strings.HasSuffix(d.Name(), "~") {
			return nil
		}
		ext := filepath.Ext(d.Name())
		if ext == "" || ext == ".yml" || ext == ".yaml" || ext == ".json" {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read vars dir %s: %w", dir, err)
	}
	sort.Strings(out)
	return out, nil
}

// finish links parentless groups under all, fills ungrouped and computes
// each host's vars, groups and connection, as Ansible's
// reconcile_inventory and get_vars do.
func (l *loader) finish() {
	all := l.inv.Groups["all"]
	for _, name := range l.groupOrder {
		if name == "all" || name == "ungrouped" || len(l.parents[name]) > 0 {
			continue
		}
		all.Children = append(all.Children, name)
		l.parents[name] = []string{"all"}
	}
	for _, h := range l.inv.Order {
		direct := l.hostGroups[h]
		if len(direct) == 0 || (len(direct) == 1 && direct[0] == "all") {
			l.addHost(l.inv.Groups["ungrouped"], h)
		}
	}
	depth := l.depths()
	for name, g := range l.inv.Groups {
		for k, v := range l.invVars[name] {
			g.Vars[k] = v
		}
		for k, v := range l.fileVars[name] {
			g.Vars[k] = v
		}
	}
	for _, name := range l.inv.Order {
		l.finishHost(l.inv.Hosts[name], depth)
	}
}

// depths is each group's longest distance from all, which orders group
// vars in Ansible: deeper groups win, then higher ansible_group_priority,
// then the name that sorts later.
func (l *loader) depths() map[string]int {
	depth := map[string]int{"all": 0}
	// The graph is acyclic (cycles were refused while reading), so the
	// memoised longest path over parents terminates and is linear.
	var of func(string) int
	of = func(g string) int {
		if d, ok := depth[g]; ok {
			return d
		}
		d := 0
		for _, p := range l.parents[g] {
			d = max(d, of(p)+1)
		}
		depth[g] = d
		return d
	}
	for _, g := range l.groupOrder {
		of(g)
	}
	return depth
}

func (l *loader) finishHost(h *Host, depth map[string]int) {
	member := map[string]bool{}
	var up func(string)
	up = func(g string) {
		if member[g] {
			return
		}
		member[g] = true
		for _, p := range l.parents[g] {
			up(p)
		}
	}
	for _, g := range l.hostGroups[h.Name] {
		up(g)
	}
	member["all"] = true
	for g := range member {
		h.Groups = append(h.Groups, g)
	}
	sort.Strings(h.Groups)

	var ordered []string
	for _, g := range h.Groups {
		if g != "all" {
			ordered = append(ordered, g)
		}
	}
	prio := func(g string) int {
		if p, ok := l.priority[g]; ok {
			return p
		}
		return 1
	}
	sort.SliceStable(ordered, func(i, j int) bool {
		a, b := ordered[i], ordered[j]
		if depth[a] != depth[b] {
			return depth[a] < depth[b]
		}
		if prio(a) != prio(b) {
			return prio(a) < prio(b)
		}
		return a < b
	})
	vars := map[string]any{}
	merge := func(m map[string]any) {
		for k, v := range m {
			vars[k] = v
		}
	}
	// Ansible's default precedence: inventory-file group vars (all
	// first), then group_vars/ files (all first), then the host's own.
	merge(l.invVars["all"])
	for _, g := range ordered {
		merge(l.invVars[g])
	}
	merge(l.fileVars["all"])
	for _, g := range ordered {
		merge(l.fileVars[g])
	}
	merge(l.hostInv[h.Name])
	merge(l.hostFile[h.Name])
	h.Conn = connInfo(h.Name, vars)
	var names []string
	for _, g := range h.Groups {
		if g != "all" && g != "ungrouped" {
			names = append(names, g)
		}
	}
	vars["inventory_hostname"] = h.Name
	groupNames := make([]any, len(names))
	for i, n := range names {
		groupNames[i] = n
	}
	vars["group_names"] = groupNames
	h.Vars = vars
}

func toInt(v any) (int, error) {
	switch t := v.(type) {
	case int:
		return t, nil
	case string:
		return strconv.Atoi(strings.TrimSpace(t))
	}
	return 0, fmt.Errorf("not an integer: %v", v)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// expandHost expands Ansible host ranges ("node[01:04]", "[a:c]x") and
// splits a trailing ":port".
func expandHost(pattern string) ([]string, int, error) {
	port := 0
	if i := strings.LastIndexByte(pattern, ':'); i > 0 && strings.Count(pattern, ":") == 1 && !strings.Contains(pattern, "[") {
		p, err := strconv.Atoi(pattern[i+1:])
		if err != nil || p < 1 || p > 65535 {
			return nil, 0, fmt.Errorf("%q is not a valid port", pattern[i+1:])
		}
		pattern, port = pattern[:i], p
	} else if i := strings.LastIndex(pattern, "]:"); i > 0 {
		p, err := strconv.Atoi(pattern[i+2:])
		if err != nil || p < 1 || p > 65535 {
			return nil, 0, fmt.Errorf("%q is not a valid port", pattern[i+2:])
		}
		pattern, port = pattern[:i+1], p
	}
	names, err := expandRange(pattern)
	return names, port, err
}

func expandRange(s string) ([]string, error) {
	open := strings.IndexByte(s, '[')
	if open < 0 {
		return []string{s}, nil
	}
	end := strings.IndexByte(s[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("unclosed host range")
	}
	end += open
	head, spec, tail := s[:open], s[open+1:end], s[end+1:]
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("host range [%s] must be [begin:end] or [begin:end:step]", spec)
	}
	beg, last := parts[0], parts[1]
	step := 1
	if len(parts) == 3 {
		n, err := strconv.Atoi(parts[2])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("host range step %q must be a positive number", parts[2])
		}
		step = n
	}
	if beg == "" {
		beg = "0"
	}
	if last == "" {
		return nil, fmt.Errorf("host range [%s] must give an end", spec)
	}
	var items []string
	if len(beg) == 1 && len(last) == 1 && isLetter(beg[0]) && isLetter(last[0]) {
		if beg[0] > last[0] {
			return nil, fmt.Errorf("host range [%s] ends before it begins", spec)
		}
		for c := int(beg[0]); c <= int(last[0]); c += step {
			items = append(items, string(rune(c)))
		}
	} else {
		b, err1 := strconv.Atoi(beg)
		e, err2 := strconv.Atoi(last)
		if err1 != nil || err2 != nil || b < 0 {
			return nil, fmt.Errorf("host range [%s] must be numbers or single letters", spec)
		}
		if b > e {
			return nil, fmt.Errorf("host range [%s] ends before it begins", spec)
		}
		if (e-b)/step+1 > maxRange {
			return nil, fmt.Errorf("host range [%s] has more than %d hosts", spec, maxRange)
		}
		width := 0
		if len(beg) > 1 && beg[0] == '0' {
			if len(beg) != len(last) {
				return nil, fmt.Errorf("host range [%s] must give begin and end with the same number of digits", spec)
			}
			width = len(beg)
		}
		for i := b; i <= e; i += step {
			items = append(items, fmt.Sprintf("%0*d", width, i))
		}
	}
	rest, err := expandRange(tail)
	if err != nil {
		return nil, err
	}
	if len(items)*len(rest) > maxRange {
		return nil, fmt.Errorf("host range expands to more than %d hosts", maxRange)
	}
	var out []string
	for _, it := range items {
		for _, r := range rest {
			out = append(out, head+it+r)
		}
	}
	return out, nil
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
