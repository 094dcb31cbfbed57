// Package inventory reads Ansible inventories as ansible-inventory does:
// YAML and INI files (the format is told by the content, not the file
// name), several sources merged in order, inventory directories (their
// files in name order, skipping what Ansible skips), group_vars/ and
// host_vars/ beside each source, with Ansible's variable precedence, and
// Ansible Vault: inline `!vault` values and encrypted vars files, opened
// with the passwords in Options. It also selects hosts with Ansible's
// pattern language (--limit, a play's hosts:).
//
// Every problem in a file is reported as an *Error naming file:line:col
// (file:line for INI), and no input makes the loader panic. A vaulted
// value is never used as its ciphertext: without the password it is an
// error naming where it is.
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
	"nodeconverge/engine/safetext"
	"nodeconverge/engine/vault"
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
	// Vars are the merged vars, as `ansible-inventory --list` shows them
	// (a vaulted value decrypted), plus the magic vars inventory_hostname
	// and group_names so templates can use them as in Ansible.
	Vars map[string]any
	// Groups lists every group containing the host, including ancestors
	// and "all", sorted.
	Groups []string
	Conn   ConnInfo
	// list is Vars as `ansible-inventory --list` prints them: an inline
	// vaulted value as {"__ansible_vault": ciphertext}. nil when the
	// inventory has no inline vaulted value.
	list map[string]any
}

// Group is one inventory group.
type Group struct {
	Name     string
	Hosts    []string // hosts listed directly in the group, in file order
	Children []string // child groups, in file order
	// Vars are the group's own vars: the inventory sources', overridden
	// by group_vars/<name> beside each source, in source order.
	Vars map[string]any
}

// Inventory is a loaded inventory.
type Inventory struct {
	// Path is the first source, Sources all of them in the order given.
	Path    string
	Sources []string
	Hosts   map[string]*Host
	Order   []string // hosts in first-seen order
	Groups  map[string]*Group
	// groupOrder is the order groups were created in, which is the
	// order Ansible tries them when matching a pattern.
	groupOrder []string
	secrets    []string
}

// Options tunes LoadSources.
type Options struct {
	// Vault are the passwords that open inline `!vault` values and
	// encrypted files; every one is tried, as Ansible does.
	Vault []vault.Secret
}

// Secrets returns every value that came out of a vault (an inline value,
// or a string in an encrypted file), so a caller can mask them wherever
// the run prints: they are secrets whatever their variable is called.
func (inv *Inventory) Secrets() []string {
	return append([]string(nil), inv.secrets...)
}

// The largest host range ("node[0001:9999]") expanded, so a typo cannot
// make the loader allocate without bound.
const maxRange = 10000

// maxWork bounds group definitions visited, which aliases can multiply.
const maxWork = 10000

type loader struct {
	file       string // the file being read
	opts       Options
	inv        *Inventory
	parents    map[string][]string         // group -> parent groups
	invVars    map[string]map[string]any   // group -> inventory-file vars
	fileVars   []map[string]map[string]any // per source: group -> group_vars/ vars
	hostInv    map[string]map[string]any   // host -> inventory-file vars
	hostFile   []map[string]map[string]any // per source: host -> host_vars/ vars
	hostGroups map[string][]string         // host -> groups listing it directly
	priority   map[string]int              // ansible_group_priority, default 1
	work       int
	// secret is set while reading a file that was vault-encrypted as a
	// whole: every string in it is a secret.
	secret  bool
	secrets map[string]bool
	// sawVault is set once an inline vaulted value was read, so hosts
	// need a --list form with the envelopes.
	sawVault bool
}

// Load reads one inventory source (a file or a directory) and the
// group_vars/ and host_vars/ directories beside it, without vault
// passwords.
func Load(path string) (*Inventory, error) {
	return LoadSources([]string{path}, Options{})
}

func newLoader(paths []string, opts Options) *loader {
	path := ""
	if len(paths) > 0 {
		path = paths[0]
	}
	l := &loader{
		opts: opts,
		inv: &Inventory{Path: path, Sources: append([]string(nil), paths...),
			Hosts: map[string]*Host{}, Groups: map[string]*Group{}},
		parents:    map[string][]string{},
		invVars:    map[string]map[string]any{},
		hostInv:    map[string]map[string]any{},
		hostGroups: map[string][]string{},
		priority:   map[string]int{},
		secrets:    map[string]bool{},
	}
	// Ansible creates these two before reading anything, which fixes
	// "ungrouped" as the first child of "all".
	l.group("all")
	l.group("ungrouped")
	l.inv.Groups["all"].Children = []string{"ungrouped"}
	l.parents["ungrouped"] = []string{"all"}
	return l
}

// load parses inventory text that was read from path; group_vars/ and
// host_vars/ are looked up beside path.
func load(path string, data []byte) (*Inventory, error) {
	l := newLoader([]string{path}, Options{})
	if err := l.parseFile(path, data); err != nil {
		return nil, err
	}
	return l.done()
}

// done reads the vars directories beside the sources and resolves hosts.
func (l *loader) done() (*Inventory, error) {
	if err := l.loadVarsDirs(); err != nil {
		return nil, err
	}
	l.finish()
	return l.inv, nil
}

// parseYAMLInventory reads a YAML inventory whose root is a mapping.
func (l *loader) parseYAMLInventory(path string, root *yaml.Node) error {
	l.file = path
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		name, err := l.keyName(k, seen, "group")
		if err != nil {
			return err
		}
		if err := checkName("group", name); err != nil {
			return nodeErr(path, k, "%v", err)
		}
		if contains(groupKeys, name) {
			// Ansible would make a group called "hosts"; that is never
			// what was meant.
			return nodeErr(path, k, "top-level key %q is a group keyword, not a group: put it under a group such as `all:`", name)
		}
		if name == "plugin" {
			if v := yamlx.Deref(root.Content[i+1]); v != nil && v.Kind == yaml.ScalarNode {
				return nodeErr(path, k, "this is an inventory plugin configuration (plugin: %s), which nodeconverge does not run: give it a YAML or INI inventory (ansible-inventory -i %s --list -y writes one)", v.Value, path)
			}
		}
		if err := l.parseGroup(name, k, root.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
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
		l.inv.groupOrder = append(l.inv.groupOrder, name)
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
			for k, x := range vars {
				if err := l.setGroupVar(name, k, x); err != nil {
					return nodeErr(l.file, val, "vars of group %q: %v", name, err)
				}
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
			// As Ansible's add_host: a port applies to a host seen
			// for the first time only.
			if l.addHost(g, h) && port != 0 {
				l.hostInv[h]["ansible_port"] = port
			}
			for k, x := range vars {
				l.hostInv[h][k] = x
			}
		}
	}
	return nil
}

// addHost adds a host to a group and reports whether the host is new.
func (l *loader) addHost(g *Group, name string) bool {
	_, ok := l.inv.Hosts[name]
	if !ok {
		l.inv.Hosts[name] = &Host{Name: name}
		l.inv.Order = append(l.inv.Order, name)
		l.hostInv[name] = map[string]any{}
	}
	for _, x := range g.Hosts {
		if x == name {
			return !ok
		}
	}
	g.Hosts = append(g.Hosts, name)
	l.hostGroups[name] = append(l.hostGroups[name], g.Name)
	return !ok
}

// setGroupVar sets one inventory var of a group; ansible_group_priority,
// as in Ansible, orders the group and is not a var itself.
func (l *loader) setGroupVar(group, k string, x any) error {
	if l.invVars[group] == nil {
		l.invVars[group] = map[string]any{}
	}
	if k == "ansible_group_priority" {
		p, err := toInt(plain(x))
		if err != nil {
			return fmt.Errorf("ansible_group_priority must be an integer, got %v", plain(x))
		}
		l.priority[group] = p
		return nil
	}
	l.invVars[group][k] = x
	return nil
}

// addChild makes child a child group of parent, refusing a cycle before
// anything could follow it.
func (l *loader) addChild(parent, child string) error {
	if child == "all" {
		return fmt.Errorf("group \"all\" cannot be a child of %q: every group is already in all", parent)
	}
	if path := l.pathTo(child, parent); path != nil {
		return fmt.Errorf("group cycle: %s -> %s", strings.Join(path, " -> "), child)
	}
	l.group(child)
	g := l.group(parent)
	if !contains(g.Children, child) {
		g.Children = append(g.Children, child)
		l.parents[child] = append(l.parents[child], parent)
	}
	return nil
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
		if err := checkName("group", child); err != nil {
			return nodeErr(l.file, k, "%v", err)
		}
		// The edge goes in before the child is read, so a cycle is
		// found before the recursion could follow it forever.
		if err := l.addChild(g.Name, child); err != nil {
			return nodeErr(l.file, k, "%v", err)
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
			all, err := l.decode(file, v)
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
		x, err := l.decode(file, val)
		if err != nil {
			return nil, err
		}
		if err := checkConnVar(k.Value, plain(x)); err != nil {
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

// varsExts are the names host_group_vars tries for an entity, in order;
// the first that exists is the only one read (Ansible's find_vars_files),
// so group_vars/all/ hides group_vars/all.yml.
var varsExts = []string{"", ".yml", ".yaml", ".json"}

// sourceDir is where a source's group_vars/ and host_vars/ are: inside a
// directory source, beside a file.
func sourceDir(source string) string {
	if st, err := os.Stat(source); err == nil && st.IsDir() {
		return source
	}
	return filepath.Dir(source)
}

// loadVarsDirs reads group_vars/ and host_vars/ beside every source, as
// Ansible's host_group_vars plugin does: for each source, <name>,
// <name>.yml, .yaml or .json, the first one that exists; a directory
// <name>/ is read file by file in name order.
func (l *loader) loadVarsDirs() error {
	sources := l.inv.Sources
	l.fileVars = make([]map[string]map[string]any, len(sources))
	l.hostFile = make([]map[string]map[string]any, len(sources))
	for i, src := range sources {
		dir := sourceDir(src)
		var err error
		if l.fileVars[i], err = l.readVarsDir(filepath.Join(dir, "group_vars"), l.inv.groupOrder); err != nil {
			return err
		}
		if l.hostFile[i], err = l.readVarsDir(filepath.Join(dir, "host_vars"), l.inv.Order); err != nil {
			return err
		}
	}
	return nil
}

// readVarsDir reads the vars of each of names from dir (a group_vars/ or
// host_vars/ directory): name -> vars, for the names that have any.
// Without such a directory there are none, found with one stat rather
// than one per name.
func (l *loader) readVarsDir(dir string, names []string) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return out, nil
	}
	for _, name := range names {
		vars, err := l.readVarsFor(dir, name)
		if err != nil {
			return nil, err
		}
		if vars != nil {
			out[name] = vars
		}
	}
	return out, nil
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
			sub, err := varsDirFiles(p)
			if err != nil {
				return nil, err
			}
			files = sub
		} else {
			files = []string{p}
		}
		break
	}
	if len(files) == 0 {
		return nil, nil
	}
	out := map[string]any{}
	for _, f := range files {
		vars, err := l.readVarsFile(f)
		if err != nil {
			return nil, err
		}
		for k, v := range vars {
			out[k] = v
		}
	}
	return out, nil
}

// readVarsFile reads one group_vars/host_vars file, decrypting it when it
// is vault-encrypted as a whole.
func (l *loader) readVarsFile(f string) (map[string]any, error) {
	data, err := inputs.ReadFile(f, "vars file", inputs.MaxVarsFile)
	if err != nil {
		return nil, fmt.Errorf("read vars file %s: %w", f, err)
	}
	data, secret, err := l.openVault(f, data, "vars file")
	if err != nil {
		return nil, err
	}
	l.secret = secret
	defer func() { l.secret = false }()
	doc, err := parseYAML(f, data)
	if err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return l.varsMapping(f, doc.Content[0], "vars file")
}

// varsDirFiles lists a group_vars/<name>/ directory as Ansible's
// _get_dir_vars_files does: entries in name order, hidden ones and
// backups (~) skipped, files with no extension or .yml/.yaml/.json,
// subdirectories without an extension read in place.
func varsDirFiles(dir string) ([]string, error) {
	return varsDirFilesDepth(dir, 0)
}

func varsDirFilesDepth(dir string, depth int) ([]string, error) {
	if depth > 32 {
		return nil, fmt.Errorf("read vars dir %s: nested too deep", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read vars dir %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
			continue
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		ext := filepath.Ext(name)
		switch {
		case st.IsDir() && ext == "":
			sub, err := varsDirFilesDepth(p, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		case st.Mode().IsRegular() && (ext == "" || contains(varsExts[1:], ext)):
			out = append(out, p)
		}
	}
	return out, nil
}

// finish links parentless groups under all, fills ungrouped and computes
// each host's vars, groups and connection, as Ansible's
// reconcile_inventory and get_vars do.
func (l *loader) finish() {
	all := l.inv.Groups["all"]
	for _, name := range l.inv.groupOrder {
		if name == "all" || name == "ungrouped" || len(l.parents[name]) > 0 {
			continue
		}
		all.Children = append(all.Children, name)
		l.parents[name] = []string{"all"}
	}
	ungrouped := l.inv.Groups["ungrouped"]
	for _, h := range l.inv.Order {
		direct := l.hostGroups[h]
		other := false
		for _, g := range direct {
			other = other || (g != "all" && g != "ungrouped")
		}
		switch {
		case other && contains(direct, "ungrouped"):
			// A host listed before any INI section (or under
			// ungrouped:) that is in a group too leaves ungrouped.
			ungrouped.Hosts = remove(ungrouped.Hosts, h)
			l.hostGroups[h] = remove(direct, "ungrouped")
		case !other && !contains(direct, "ungrouped"):
			l.addHost(ungrouped, h)
		}
	}
	depth := l.depths()
	for name, g := range l.inv.Groups {
		vars := map[string]any{}
		for k, v := range l.invVars[name] {
			vars[k] = v
		}
		for _, fv := range l.fileVars {
			for k, v := range fv[name] {
				vars[k] = v
			}
		}
		g.Vars = unvault(vars, 0).(map[string]any)
	}
	for _, name := range l.inv.Order {
		l.finishHost(l.inv.Hosts[name], depth)
	}
	for s := range l.secrets {
		l.inv.secrets = append(l.inv.secrets, s)
	}
	sort.Strings(l.inv.secrets)
}

func remove(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
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
	for _, g := range l.inv.groupOrder {
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
	h.Groups = h.Groups[:0]
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
	// Ansible's default precedence (VariableManager.get_vars): the
	// inventory sources' vars of all, group_vars/all beside each source
	// in source order, the inventory vars of the host's other groups
	// (shallow to deep), their group_vars/ files (source by source, each
	// shallow to deep), the host's own inventory vars, then host_vars/
	// beside each source.
	merge(l.invVars["all"])
	for _, fv := range l.fileVars {
		merge(fv["all"])
	}
	for _, g := range ordered {
		merge(l.invVars[g])
	}
	for _, fv := range l.fileVars {
		for _, g := range ordered {
			merge(fv[g])
		}
	}
	merge(l.hostInv[h.Name])
	for _, hf := range l.hostFile {
		merge(hf[h.Name])
	}
	if l.sawVault {
		h.list = listForm(vars, 0).(map[string]any)
		vars = unvault(vars, 0).(map[string]any)
	}
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
// checkName refuses a host or group name that holds a control character
// (a newline, an escape, a NUL, a bidi override: safetext.Unsafe) or bytes
// that are not UTF-8. Such a name is never a machine's name (Ansible's
// host patterns and DNS names have none), and printed it would forge
// output: "evil\nnuc2 : ok=3 ..." reads as a recap line of nuc2.
func checkName(what, name string) error {
	if safetext.Line(name) != name {
		return fmt.Errorf("%s name %s holds a control character or bytes that are not UTF-8 (shown escaped): names are printed on one line, so they may not", what, strconv.Quote(name))
	}
	// A name with blanks around it is a quoting slip (`" nuc1":`), never a
	// machine's name, and it would be a second host beside "nuc1".
	if strings.TrimSpace(name) != name {
		return fmt.Errorf("%s name %s starts or ends with a space: remove the space (names are matched exactly)", what, strconv.Quote(name))
	}
	return nil
}

func expandHost(pattern string) ([]string, int, error) {
	if err := checkName("host", pattern); err != nil {
		return nil, 0, err
	}
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
