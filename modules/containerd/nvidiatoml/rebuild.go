package nvidiatoml

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DetectVersion returns the value of a top-level `version = N` line, or 0
// when there is none. It scans statements, not a parsed document, so it
// works on files that do not parse (duplicated tables).
func DetectVersion(src []byte) int {
	for _, s := range parse(src) {
		switch s.kind {
		case kHeader, kArrayHeader:
			return 0
		case kKeyVal:
			if len(s.path) != 1 || s.path[0] != "version" {
				continue
			}
			v := string(src[s.valStart:s.end])
			if i := strings.IndexByte(v, '#'); i >= 0 {
				v = v[:i]
			}
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
}

// newlineOf returns the line ending of src: CRLF if its first line ends
// with one, else LF.
func newlineOf(src []byte) string {
	if i := bytes.IndexByte(src, '\n'); i > 0 && src[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// lastLineBlank reports whether out ends with a complete blank line.
func lastLineBlank(out []byte) bool {
	if len(out) == 0 || out[len(out)-1] != '\n' {
		return false
	}
	body := out[:len(out)-1]
	start := bytes.LastIndexByte(body, '\n') + 1
	return len(bytes.Trim(body[start:], " \t\r")) == 0
}

// Rebuild strips every nvidia runtime from src and, if present, writes rts
// back as exactly one set in layout l. Runtimes count as nvidia's by
// IsManaged over the names in rts, so rts also names what to remove
// when present is false.
//
// The set goes where the first stripped nvidia table was (its attached
// comments included), or at the end of the file if there was none,
// separated from its neighbours by one blank line unless one is already
// there; it uses the file's own newline style. Running Rebuild on its own
// output returns that output unchanged.
//
// default_runtime_name lines that name a stripped runtime which will not
// exist afterwards are removed. With setDefault, default_runtime_name of
// l's CRI plugin is set to rts[0].Name: replaced in place if the file sets
// it, else added to the [PLUGIN.containerd] table, else (that table only
// implied by dotted keys) as a dotted key next to them, else in a new
// [PLUGIN.containerd] header written before the runtimes.
//
// Rebuild refuses files it cannot edit safely line by line: a table on the
// way to the runtimes defined as an inline value or array of tables (the
// runtimes could hide inside, and a header could not be added), and a
// multi-line value left open at the point where text would be inserted.
func Rebuild(src []byte, l Layout, rts []Runtime, setDefault bool, present bool) ([]byte, error) {
	target := l.plugin()
	switch {
	case target == "":
		return nil, fmt.Errorf("containerd config version %d: want 1, 2 or 3", l.Version)
	case len(rts) == 0:
		return nil, errors.New("no runtimes given")
	case setDefault && !present:
		return nil, errors.New("cannot set the default runtime to a runtime being removed")
	}
	if err := ValidateRuntimes(rts); err != nil {
		return nil, fmt.Errorf("validate runtimes: %w", err)
	}
	names := make([]string, len(rts))
	for i, rt := range rts {
		names[i] = rt.Name
	}
	isNvidia := IsManaged(names)
	c := classify(src, rules{
		isNvidia: isNvidia,
		dropDefault: func(plugin, v string) bool {
			return isNvidia(v) && !(present && plugin == target && slices.Contains(names, v))
		},
	})
	if err := c.checkEditable(); err != nil {
		return nil, err
	}
	if !present {
		return c.kept(), nil
	}
	// The newline style comes from the lines that stay, so that it cannot
	// change once the nvidia lines are replaced by rendered ones.
	nl := c.keptNewline()
	replace := map[int][]byte{}
	after := map[int][]byte{}
	var head []byte
	if setDefault {
		var err error
		if head, err = c.setDefault(target, rts[0].Name, nl, replace, after); err != nil {
			return nil, err
		}
	}
	block := append(head, Render(l, rts, nl)...)
	if c.firstBlock >= 0 {
		// Take the indentation of the table replaced, so files written
		// in containerd's nested dump style keep their shape.
		h := c.stmts[c.firstHeader]
		block = indentLines(block, c.src[h.start:h.start+int(h.indent)])
	}

	out := make([]byte, 0, len(src)+len(block)+64)
	placed := false
	// place writes the block before statement i with one blank line on
	// either side unless the neighbour already is one.
	place := func(i int) {
		placed = true
		if len(out) > 0 {
			if out[len(out)-1] != '\n' {
				out = append(out, nl...)
			}
			if !lastLineBlank(out) {
				out = append(out, nl...)
			}
		}
		out = append(out, block...)
		for j := i; j < len(c.stmts); j++ {
			if c.drop[j] {
				continue
			}
			s := c.stmts[j]
			if s.kind != kBlank {
				out = append(out, nl...)
			}
			break
		}
	}
	for i, s := range c.stmts {
		if i == c.firstBlock {
			place(i)
		}
		if c.drop[i] {
			continue
		}
		if r, ok := replace[i]; ok {
			out = append(out, r...)
		} else {
			out = append(out, c.src[s.start:s.end]...)
		}
		if a, ok := after[i]; ok {
			if s.open {
				return nil, fmt.Errorf("line %d: value is not terminated; cannot add default_runtime_name after it", s.line)
			}
			if out[len(out)-1] != '\n' {
				out = append(out, nl...)
			}
			out = append(out, a...)
		}
	}
	if !placed {
		if last := c.lastKept(); last >= 0 && c.stmts[last].open {
			return nil, fmt.Errorf("line %d: value is not terminated; appending runtimes would land inside it", c.stmts[last].line)
		}
		place(len(c.stmts))
	}
	return out, nil
}

// keptNewline is the newline style of the lines that stay: that of the
// first kept line ending, else the source's, else CRLF when the last kept
// line ends in '\r' (the "\n" added to end it would make it CRLF). It reads
// the statements in place, so a large file is not copied to learn it.
func (c *classified) keptNewline() string {
	lastCR := false
	for i, s := range c.stmts {
		if c.drop[i] {
			continue
		}
		chunk := c.src[s.start:s.end]
		if j := bytes.IndexByte(chunk, '\n'); j >= 0 {
			if j > 0 && chunk[j-1] == '\r' {
				return "\r\n"
			}
			return "\n"
		}
		lastCR = bytes.HasSuffix(chunk, []byte("\r"))
	}
	if lastCR {
		return "\r\n"
	}
	return newlineOf(c.src)
}

func (c *classified) lastKept() int {
	for i := len(c.stmts) - 1; i >= 0; i-- {
		if !c.drop[i] {
			return i
		}
	}
	return -1
}

// checkEditable refuses kept statements that define a table on the way to
// the runtimes as a value or an array of tables.
func (c *classified) checkEditable() error {
	for i, s := range c.stmts {
		if c.drop[i] {
			continue
		}
		var p []string
		switch s.kind {
		case kKeyVal:
			p = c.abs(i)
		case kArrayHeader:
			p = s.path
		default:
			continue
		}
		if holdsRuntimes(p) {
			return fmt.Errorf("line %d: %s is defined as a value or an array of tables; runtimes inside it cannot be edited line by line, rewrite it as [table] headers", s.line, formatPath(p))
		}
	}
	return nil
}

// setDefault arranges for default_runtime_name of plugin to be name: it
// fills replace/after for existing statements, or returns a header block to
// write before the runtimes.
func (c *classified) setDefault(plugin, name, nl string, replace, after map[int][]byte) ([]byte, error) {
	containerd := []string{"plugins", plugin, "containerd"}
	var existing []int
	header, dotted := -1, -1
	for i, s := range c.stmts {
		if c.drop[i] {
			continue
		}
		switch s.kind {
		case kHeader:
			if header < 0 && slices.Equal(s.path, containerd) {
				header = i
			}
		case kKeyVal:
			abs := c.abs(i)
			if p, ok := defaultOf(abs); ok && p == plugin {
				existing = append(existing, i)
			} else if dotted < 0 && len(c.table[i]) < len(containerd) && len(abs) > len(containerd) &&
				slices.Equal(abs[:len(containerd)], containerd) {
				dotted = i
			}
		}
	}
	value := quote(name)
	switch {
	case len(existing) > 0:
		s := c.stmts[existing[0]]
		if s.open {
			return nil, fmt.Errorf("line %d: default_runtime_name value is not terminated", s.line)
		}
		r := append(slices.Clone(c.src[s.start:s.valStart]), value...)
		if bytes.HasSuffix(c.src[s.start:s.end], []byte("\n")) {
			r = append(r, lineEnding(c.src[s.start:s.end])...)
		}
		replace[existing[0]] = r
		for _, i := range existing[1:] {
			c.drop[i] = true
		}
	case header >= 0:
		indent := strings.Repeat(" ", int(c.stmts[header].indent)+2)
		after[header] = []byte(indent + "default_runtime_name = " + value + nl)
	case dotted >= 0:
		s := c.stmts[dotted]
		rel := append(slices.Clone(containerd[len(c.table[dotted]):]), "default_runtime_name")
		after[dotted] = []byte(string(c.src[s.start:s.start+int(s.indent)]) + formatPath(rel) + " = " + value + nl)
	default:
		return []byte("[" + formatPath(containerd) + "]" + nl +
			"  default_runtime_name = " + value + nl + nl), nil
	}
	return nil, nil
}

// lineEnding returns the newline that ends chunk, which ends with '\n'.
func lineEnding(chunk []byte) string {
	if bytes.HasSuffix(chunk, []byte("\r\n")) {
		return "\r\n"
	}
	return "\n"
}

// indentLines prefixes every non-empty line of b with indent.
func indentLines(b, indent []byte) []byte {
	if len(indent) == 0 {
		return b
	}
	var out []byte
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		b = b[len(line):]
		if len(bytes.TrimRight(line, "\r\n")) > 0 {
			out = append(out, indent...)
		}
		out = append(out, line...)
	}
	return out
}

// SetVersion returns src with the value of its top-level `version = N`
// line replaced by v, every other byte kept; src unchanged when it has no
// such line (a file without one is migrated from version 0 by containerd
// 2.x, which reads any layout, so none is added).
func SetVersion(src []byte, v int) []byte {
	for _, s := range parse(src) {
		switch s.kind {
		case kHeader, kArrayHeader:
			return src
		case kKeyVal:
			if len(s.path) != 1 || s.path[0] != "version" {
				continue
			}
			end := s.valStart
			for end < len(src) && src[end] >= '0' && src[end] <= '9' {
				end++
			}
			if end == s.valStart {
				return src
			}
			out := make([]byte, 0, len(src)+2)
			out = append(out, src[:s.valStart]...)
			out = strconv.AppendInt(out, int64(v), 10)
			return append(out, src[end:]...)
		}
	}
	return src
}
