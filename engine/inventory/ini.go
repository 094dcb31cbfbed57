package inventory

import (
	"fmt"
	"regexp"
	"strings"
)

// iniSection is Ansible's INI section header: [group], [group:vars],
// [group:children], a comment allowed after it.
var iniSection = regexp.MustCompile(`^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$`)

// iniGroupName is a line of a [group:children] section.
var iniGroupName = regexp.MustCompile(`^([^:\]\s]+)\s*(?:#.*)?$`)

// iniLines splits text into lines as Python's str.splitlines does for
// the line ends inventories use.
func iniLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

type iniPending struct {
	line    int
	state   string
	parents []string
}

// parseINI reads an INI inventory exactly as Ansible's ini plugin does:
// lines before any section are hosts of "ungrouped"; a host line is a
// host or range (node[01:10], [a:f]) with an optional :port, then
// key=value vars split as a shell would (quotes, "#" comments); a
// [g:vars] line is key=value; [g:children] lists groups, which must be
// declared as a section somewhere in the file (or an earlier source).
// Values are Python literals where they parse as one (1, 1.5, True,
// 'text', [1, 2], {'k': 'v'}), text otherwise ("yes", "true", 01).
func (l *loader) parseINI(path string, data []byte) error {
	l.file = path
	lineNo := 0
	fail := func(format string, a ...any) error {
		return &Error{File: path, Line: lineNo, Msg: "INI: " + fmt.Sprintf(format, a...)}
	}
	pending := map[string]*iniPending{}
	var pendingOrder []string
	addPending := func(name string, p *iniPending) {
		if _, ok := pending[name]; !ok {
			pendingOrder = append(pendingOrder, name)
		}
		pending[name] = p
	}
	var addPendingChildren func(group string, depth int) error
	addPendingChildren = func(group string, depth int) error {
		p := pending[group]
		if p == nil || depth > maxWork {
			return nil
		}
		delete(pending, group)
		for _, parent := range p.parents {
			if err := l.addChild(parent, group); err != nil {
				return fail("%v", err)
			}
			if pp := pending[parent]; pp != nil && pp.state == "children" {
				if err := addPendingChildren(parent, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}

	group, state := "ungrouped", "hosts"
	for _, raw := range iniLines(string(data)) {
		lineNo++
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		if m := iniSection.FindStringSubmatch(line); m != nil {
			name, st := m[1], m[2]
			if err := checkName("group", name); err != nil {
				return fail("%v", err)
			}
			if st == "" {
				st = "hosts"
			} else if st != "hosts" && st != "children" && st != "vars" {
				return fail("section [%s:%s] has unknown type %q: want [%s], [%s:vars] or [%s:children]", name, st, st, name, name, name)
			}
			if _, ok := l.inv.Groups[name]; !ok {
				// [g] or [g:children] declares a group; [g:vars] is
				// only allowed for a group declared elsewhere.
				if _, ok := pending[name]; st == "vars" && !ok {
					addPending(name, &iniPending{line: lineNo, state: "vars"})
				}
				l.group(name)
			}
			if p := pending[name]; p != nil && st != "vars" {
				switch p.state {
				case "children":
					if err := addPendingChildren(name, 0); err != nil {
						return err
					}
				case "vars":
					delete(pending, name)
				}
			}
			group, state = name, st
			continue
		}
		if line[0] == '[' && line[len(line)-1] == ']' {
			return fail("invalid section %s: a section is [group], [group:vars] or [group:children], with no spaces", line)
		}
		switch state {
		case "hosts":
			if err := l.iniHostLine(group, line, fail); err != nil {
				return err
			}
		case "vars":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return fail("expected key=value in [%s:vars], got: %s", group, line)
			}
			k = strings.TrimSpace(k)
			val, err := pyLiteral(strings.TrimSpace(v))
			if err != nil {
				return fail("%s: %v", k, err)
			}
			if err := checkConnVar(k, val); err != nil {
				return fail("[%s:vars]: %v", group, err)
			}
			if l.secret {
				l.addSecrets(val, 0)
			}
			if err := l.setGroupVar(group, k, val); err != nil {
				return fail("[%s:vars]: %v", group, err)
			}
		case "children":
			m := iniGroupName.FindStringSubmatch(line)
			if m == nil {
				return fail("expected a group name in [%s:children], got: %s", group, line)
			}
			child := m[1]
			if err := checkName("group", child); err != nil {
				return fail("%v", err)
			}
			if _, ok := l.inv.Groups[child]; !ok {
				if p, ok := pending[child]; ok {
					p.parents = append(p.parents, group)
				} else {
					addPending(child, &iniPending{line: lineNo, state: "children", parents: []string{group}})
				}
				continue
			}
			if err := l.addChild(group, child); err != nil {
				return fail("%v", err)
			}
		}
	}
	// A reference that no section declared: the first one, as Ansible
	// reports it.
	for _, name := range pendingOrder {
		p, ok := pending[name]
		if !ok {
			continue
		}
		lineNo = p.line
		if p.state == "vars" {
			return fail("section [%s:vars] is for a group that is declared nowhere: add a [%s] section (it may be empty) or list it under a [parent:children]", name, name)
		}
		return fail("section [%s:children] names group %q, which is declared nowhere: add a [%s] section (it may be empty)", p.parents[len(p.parents)-1], name, name)
	}
	return nil
}

// iniHostLine reads "host[:port] [key=value ...]" into group.
func (l *loader) iniHostLine(group, line string, fail func(string, ...any) error) error {
	tokens, err := shlexSplit(line)
	if err != nil {
		return fail("host line %q: %v", line, err)
	}
	if len(tokens) == 0 || tokens[0] == "" {
		return fail("host line %q has no host name", line)
	}
	pattern := tokens[0]
	if pattern == "---" {
		return fail("host \"---\" is the start of a YAML document: this file is neither a valid YAML nor a valid INI inventory")
	}
	names, port, err := expandHost(pattern)
	if err != nil {
		return fail("host %q: %v", pattern, err)
	}
	if strings.HasSuffix(strings.TrimSpace(pattern), ":") && port == 0 {
		return fail("host %q ends in \":\", which is reserved for a port", pattern)
	}
	vars := map[string]any{}
	for _, t := range tokens[1:] {
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			return fail("expected key=value host variable after host %q, got: %s", pattern, t)
		}
		val, err := pyLiteral(v)
		if err != nil {
			return fail("host %q: %s: %v", pattern, k, err)
		}
		if err := checkConnVar(k, val); err != nil {
			return fail("host %q: %v", pattern, err)
		}
		if l.secret {
			l.addSecrets(val, 0)
		}
		vars[k] = val
	}
	g := l.group(group)
	for _, h := range names {
		if l.addHost(g, h) && port != 0 {
			l.hostInv[h]["ansible_port"] = port
		}
		for k, x := range vars {
			l.hostInv[h][k] = x
		}
	}
	return nil
}
