package nvidiatoml

import "slices"

// StripOptions tunes Strip.
type StripOptions struct {
	// DropDefaultRuntimeName also removes `default_runtime_name` lines whose
	// value names a runtime isNvidia accepts, so a file without nvidia
	// runtimes does not point containerd at a handler that is gone.
	DropDefaultRuntimeName bool
}

// rules says what classify removes.
type rules struct {
	isNvidia func(string) bool
	// match, when set, replaces isNvidia: a table or key whose absolute
	// path it accepts is stripped with everything beneath it (StripTables).
	match func(path []string) bool
	// dropDefault decides, for a default_runtime_name line under plugin
	// with string value v, whether it goes. nil keeps them all.
	dropDefault func(plugin, v string) bool
}

// classified is a parsed file with the verdict for every statement.
type classified struct {
	src   []byte
	stmts []stmt
	drop  []bool
	// table is the path of the table each statement sits in.
	table [][]string
	// removed counts stripped headers and key lines (not body lines).
	removed int
	// firstBlock is the index of the first statement of the first stripped
	// table, its attached comments included; -1 if no table was stripped.
	firstBlock int
	// firstHeader is the index of that table's header.
	firstHeader int
}

// abs returns the absolute key path a key statement assigns.
func (c *classified) abs(i int) []string {
	return append(slices.Clone(c.table[i]), c.stmts[i].path...)
}

// attached returns the index of the first comment of the run of comments
// directly above statement i that are indented no deeper than it.
func attached(stmts []stmt, i int) int {
	j := i
	for j > 0 && stmts[j-1].kind == kComment && stmts[j-1].indent <= stmts[i].indent {
		j--
	}
	return j
}

// strips reports whether the table or key at path is stripped.
func (r rules) strips(path []string) bool {
	if r.match != nil {
		return r.match(path)
	}
	_, name, ok := runtimeOf(path)
	return ok && r.isNvidia(name)
}

func classify(src []byte, r rules) *classified {
	c := &classified{src: src, stmts: parse(src), firstBlock: -1}
	c.drop = make([]bool, len(c.stmts))
	c.table = make([][]string, len(c.stmts))
	var cur []string
	inStripped := false
	region := -1 // header of the current stripped table, -1 outside one
	for i, s := range c.stmts {
		switch s.kind {
		case kHeader, kArrayHeader:
			if inStripped {
				c.keepTrailingComments(region, i)
			}
			cur = s.path
			c.table[i] = cur
			inStripped = r.strips(cur)
			first := attached(c.stmts, i)
			for j := first; j < i; j++ {
				c.drop[j] = inStripped
			}
			if inStripped {
				region = i
				c.drop[i] = true
				c.removed++
				if c.firstBlock < 0 {
					c.firstBlock, c.firstHeader = first, i
				}
			}
		case kKeyVal:
			c.table[i] = cur
			if inStripped {
				c.drop[i] = true
				continue
			}
			abs := c.abs(i)
			if r.strips(abs) {
				c.drop[i] = true
				c.removed++
				continue
			}
			if plugin, ok := defaultOf(abs); ok && r.dropDefault != nil {
				if v, ok := stringValue(src, s); ok && r.dropDefault(plugin, v) {
					c.drop[i] = true
					c.removed++
				}
			}
		default:
			c.table[i] = cur
			c.drop[i] = inStripped
		}
	}
	if inStripped {
		c.keepTrailingComments(region, len(c.stmts))
	}
	return c
}

// keepTrailingComments keeps the comments that end the body of the
// stripped table whose header is at h and whose body ends before end: from
// the first comment after the table's last statement of its own (a key or
// other text) that is indented no deeper than the header, to the end of the
// body, blank lines included. They are the operator's notes about what
// follows (an nvidia block pasted above them must not take them along), not
// the table's; comments indented like the table's keys (a commented-out
// option) still go with it. Comments that a following
// stripped header claims as its own are dropped again by that header, and
// blank lines before the first such comment go with the table, so a
// rebuilt block never accumulates blank lines.
func (c *classified) keepTrailingComments(h, end int) {
	last := h
	for j := h + 1; j < end; j++ {
		if k := c.stmts[j].kind; k != kBlank && k != kComment {
			last = j
		}
	}
	first := -1
	for j := last + 1; j < end; j++ {
		if c.stmts[j].kind == kComment && c.stmts[j].indent <= c.stmts[h].indent {
			first = j
			break
		}
	}
	if first < 0 {
		return
	}
	for j := first; j < end; j++ {
		c.drop[j] = false
	}
}

// kept returns the source with the dropped statements left out.
func (c *classified) kept() []byte {
	out := make([]byte, 0, len(c.src))
	for i, s := range c.stmts {
		if !c.drop[i] {
			out = append(out, c.src[s.start:s.end]...)
		}
	}
	return out
}

// Strip removes every nvidia runtime from src, as described in the package
// documentation, under any runtimes prefix and however often it is
// declared, and keeps every other line byte for byte. isNvidia decides which
// runtime names are nvidia's (see IsManaged). removed counts the
// stripped table headers and key lines. Strip never fails: text it cannot
// read as TOML is kept as it is.
func Strip(src []byte, isNvidia func(name string) bool, o StripOptions) (out []byte, removed int) {
	r := rules{isNvidia: isNvidia}
	if o.DropDefaultRuntimeName {
		r.dropDefault = func(_, v string) bool { return isNvidia(v) }
	}
	c := classify(src, r)
	return c.kept(), c.removed
}

// StripTables removes, by the same line-level rules as Strip, every table
// whose path match accepts (with its subtables, its body and the comments
// attached above it) and every key line that assigns at or below such a
// path through dotted keys or an inline table. Paths are absolute and
// unquoted: ["plugins", "io.containerd.grpc.v1.cri", "registry", "mirrors"].
// Every other line is kept byte for byte. It exists for edits other than
// the nvidia runtimes' (registry mirrors moved into hosts.toml files) that
// must keep the operator's file as it was around what they remove.
func StripTables(src []byte, match func(path []string) bool) (out []byte, removed int) {
	c := classify(src, rules{match: match})
	return c.kept(), c.removed
}
