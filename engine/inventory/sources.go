package inventory

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/inputs"
	"nodeconverge/engine/yamlx"
)

// LoadSources reads inventory sources as `ansible-inventory -i A -i B`
// does: each a file or a directory, merged in the order given (a later
// source's vars win over an earlier one's for the same host or group),
// then the group_vars/ and host_vars/ beside each source (inside a
// directory source), in source order.
func LoadSources(paths []string, opts Options) (*Inventory, error) {
	if len(paths) == 0 {
		return nil, errors.New("no inventory given (-i)")
	}
	l := newLoader(paths, opts)
	for _, p := range paths {
		n, err := l.source(p, 0)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("inventory directory %s holds no inventory file (Ansible skips hidden files, group_vars/, host_vars/ and the extensions %s)", p, strings.Join(ignoredExts, " "))
		}
	}
	return l.done()
}

// ignoredExts is Ansible 2.14's INVENTORY_IGNORE_EXTS default
// (REJECT_EXTS plus .orig, .ini, .cfg and .retry): files in an inventory
// directory ending so are skipped. Note .ini: an INI file in a directory
// is only read when its name has another ending (or none).
var ignoredExts = []string{".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".ini", ".cfg", ".retry"}

// ignoredNames is Ansible's IGNORED_ALWAYS: hidden entries and the vars
// directories.
var ignoredNames = regexp.MustCompile(`^\.|^host_vars$|^group_vars$|^vars_plugins$`)

// IgnoredInDirectory reports whether Ansible skips this entry of an
// inventory directory.
func IgnoredInDirectory(name string) bool {
	if ignoredNames.MatchString(name) {
		return true
	}
	for _, ext := range ignoredExts {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// source reads one source and returns how many inventory files it read.
func (l *loader) source(path string, depth int) (int, error) {
	if depth > 32 {
		return 0, fmt.Errorf("inventory directory %s: nested too deep", path)
	}
	st, err := os.Stat(path)
	if err != nil && depth == 0 && strings.Contains(path, ",") && errors.Is(err, fs.ErrNotExist) {
		return 1, l.hostList(path)
	}
	if err != nil {
		return 0, fmt.Errorf("read inventory %s: %w", path, err)
	}
	if !st.IsDir() {
		data, err := inputs.ReadFile(path, "inventory", inputs.MaxInventory)
		if err != nil {
			return 0, fmt.Errorf("read inventory %s: %w", path, err)
		}
		if st.Mode()&0o111 != 0 && strings.HasPrefix(string(data), "#!") {
			// Ansible's script plugin would run it and read its
			// output; nodeconverge runs no inventory code.
			return 0, &Error{File: path, Line: 1, Col: 1, Msg: fmt.Sprintf("this is an executable inventory script, which nodeconverge does not run: give it its output instead (ansible-inventory -i %s --list -y > inventory.yaml), or remove the executable bit if it is a static inventory", path)}
		}
		return 1, l.parseFile(path, data)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return 0, fmt.Errorf("read inventory directory %s: %w", path, err)
	}
	n := 0
	for _, e := range entries {
		if IgnoredInDirectory(e.Name()) {
			continue
		}
		k, err := l.source(filepath.Join(path, e.Name()), depth+1)
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

// hostList reads `-i 'node1,node2:2222,'` as Ansible's host_list plugin
// does: a source that is no existing path and holds a comma is a list of
// hosts (host or host:port, no ranges, no variables), all in ungrouped.
// `-c local -i localhost,` is how a node converges itself (ansible-pull's
// idiom).
func (l *loader) hostList(list string) error {
	l.file = "host list " + strconv.Quote(list)
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("inventory host list %q: host %q: %s", list, h, fmt.Sprintf(format, a...))
		}
		if strings.ContainsAny(h, " \t=\"'") || strings.Contains(h, "[") && !strings.HasPrefix(h, "[") {
			return fail("a host list names hosts only (host or host:port), without variables or ranges")
		}
		if err := l.iniHostLine("ungrouped", h, fail); err != nil {
			return err
		}
	}
	return nil
}

// parseFile reads one inventory file. The format is told by the content,
// as Ansible's plugin chain ends up doing: a YAML document that is a
// mapping is a YAML inventory; anything else is read as INI.
func (l *loader) parseFile(path string, data []byte) error {
	data, secret, err := l.openVault(path, data, "inventory")
	if err != nil {
		return err
	}
	l.secret = secret
	defer func() { l.secret = false }()
	l.file = path
	doc, yerr := parseYAML(path, data)
	var root *yaml.Node
	if yerr == nil && len(doc.Content) > 0 {
		root = yamlx.Deref(doc.Content[0])
		if root != nil && root.Kind == yaml.MappingNode {
			return l.parseYAMLInventory(path, root)
		}
	}
	if !meaningful(data) {
		return &Error{File: path, Line: 1, Col: 1, Msg: "inventory is empty: expected YAML groups (usually starting with `all:`) or INI host lines and [group] sections"}
	}
	ierr := l.parseINI(path, data)
	if ierr == nil {
		return nil
	}
	var ie *Error
	if !errors.As(ierr, &ie) {
		return ierr
	}
	// Neither: say it as the format the file looks like, and why the
	// other one did not fit either.
	if looksINI(data) {
		return ie
	}
	// Why INI did not fit either is worth saying only of a file that
	// could have been meant as INI: in a YAML inventory with a typo it
	// is noise that points away from the typo.
	iniNote := ""
	if plausiblyINI(data) {
		iniNote = fmt.Sprintf(" (not INI either: line %d: %s)", ie.Line, strings.TrimPrefix(ie.Msg, "INI: "))
	}
	if yerr != nil {
		e := yerr.(*Error)
		e.Msg += iniNote
		return e
	}
	return nodeErr(path, doc.Content[0], "inventory must be a mapping of group names (usually `all:`), got %s%s", yamlx.KindName(root), iniNote)
}

// meaningful reports whether data has a line that is not blank or a
// comment.
func meaningful(data []byte) bool {
	for _, line := range iniLines(string(data)) {
		if t := strings.TrimSpace(line); t != "" && t[0] != '#' && t[0] != ';' && t != "---" && t != "..." {
			return true
		}
	}
	return false
}

// plausiblyINI reports whether a file that is neither YAML nor INI could
// have been meant as INI: some line is an INI section header or a host line
// with key=value vars, or no line is shaped like YAML (a `key:` mapping
// entry or a `- ` list item).
func plausiblyINI(data []byte) bool {
	yamlish := false
	for _, line := range iniLines(string(data)) {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' || t[0] == ';' || t == "---" || t == "..." {
			continue
		}
		if t[0] == '[' && t[len(t)-1] == ']' || strings.Contains(t, "=") && !strings.Contains(t, ": ") && !strings.HasPrefix(t, "- ") {
			return true
		}
		if strings.HasSuffix(t, ":") || strings.Contains(t, ": ") || strings.HasPrefix(t, "- ") || t == "-" {
			yamlish = true
		}
	}
	return !yamlish
}

// looksINI reports whether the first meaningful line is an INI section
// header or an INI host line with key=value vars: then a file that is
// neither YAML nor INI is reported as INI.
func looksINI(data []byte) bool {
	for _, line := range iniLines(string(data)) {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		if t[0] == '[' && t[len(t)-1] == ']' {
			// A section header; a YAML inventory never starts with a
			// flow sequence.
			return true
		}
		return strings.Contains(t, "=") && !strings.Contains(t, ": ") && !strings.HasPrefix(t, "- ")
	}
	return false
}
