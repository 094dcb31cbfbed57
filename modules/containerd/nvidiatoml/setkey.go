package nvidiatoml

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// SetKey returns src with the key at path (a full dotted path from the
// document root, at least a table and a key) set to value, every other
// statement kept byte for byte: the value of an existing assignment is
// replaced in place (a trailing comment on that line goes with the old
// value), else a line is added under the table's header, else the table is
// appended at the end of the file. With fold, assignments whose last
// segment differs from path's only in case are the same key: the first is
// rewritten with path's spelling and the others are removed, so the file
// never holds two spellings that containerd 2.x's case-insensitive option
// decoding would choose between (issue 10, defect 2).
//
// The result is not checked here: a table defined inline or by dotted keys
// elsewhere makes an appended header invalid TOML, and the caller decodes
// every candidate back before proposing it.
func SetKey(src []byte, path []string, value any, fold bool) ([]byte, error) {
	if len(path) < 2 {
		return nil, fmt.Errorf("set %v: a key needs a table", path)
	}
	enc, err := encodeValue(value)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", formatPath(path), err)
	}
	table, last := path[:len(path)-1], path[len(path)-1]
	same := func(k string) bool { return k == last || fold && strings.EqualFold(k, last) }
	stmts := parse(src)
	var cur []string
	inArray := false
	header := -1
	var matches []int
	for i, s := range stmts {
		switch s.kind {
		case kHeader:
			cur, inArray = s.path, false
			if header < 0 && slices.Equal(cur, table) {
				header = i
			}
		case kArrayHeader:
			cur, inArray = s.path, true
		case kKeyVal:
			if inArray {
				continue
			}
			abs := append(slices.Clone(cur), s.path...)
			if len(abs) == len(path) && slices.Equal(abs[:len(table)], table) && same(abs[len(table)]) {
				matches = append(matches, i)
			}
		}
	}
	nl := newlineOf(src)
	var out bytes.Buffer
	switch {
	case len(matches) > 0:
		first := stmts[matches[0]]
		if first.open {
			return nil, fmt.Errorf("line %d: the value of %s is not terminated", first.line, formatPath(path))
		}
		for i, s := range stmts {
			switch {
			case i == matches[0]:
				// The key is respelled as asked, relative to its table
				// statement's own prefix, so a dotted assignment stays one.
				rel := slices.Clone(s.path)
				rel[len(rel)-1] = last
				out.Write(src[s.start : s.start+int(s.indent)])
				out.WriteString(formatPath(rel) + " = " + enc)
				if bytes.HasSuffix(src[s.start:s.end], []byte("\n")) {
					out.WriteString(lineEnding(src[s.start:s.end]))
				}
			case slices.Contains(matches, i):
				// A second spelling of the same key goes.
			default:
				out.Write(src[s.start:s.end])
			}
		}
	case header >= 0:
		// After the table's last key, so keys added one by one keep their
		// order, with that key's indentation.
		h := stmts[header]
		indent := strings.Repeat(" ", int(h.indent)+2)
		after := h
		for _, s := range stmts[header+1:] {
			if s.kind == kHeader || s.kind == kArrayHeader {
				break
			}
			if s.kind == kKeyVal {
				after = s
				indent = string(src[s.start : s.start+int(s.indent)])
			}
		}
		out.Write(src[:after.end])
		if !bytes.HasSuffix(src[:after.end], []byte("\n")) {
			out.WriteString(nl)
		}
		out.WriteString(indent + formatKey(last) + " = " + enc + nl)
		out.Write(src[after.end:])
	default:
		out.Write(src)
		if len(src) > 0 && !bytes.HasSuffix(src, []byte("\n")) {
			out.WriteString(nl)
		}
		if len(src) > 0 && !lastLineBlank(src) {
			out.WriteString(nl)
		}
		out.WriteString("[" + formatPath(table) + "]" + nl + "  " + formatKey(last) + " = " + enc + nl)
	}
	return out.Bytes(), nil
}

// v1CRI finds a table of the CRI plugin under its version 1 name.
var v1CRI = regexp.MustCompile(`(?m)^[ \t]*\[\s*plugins\s*\.\s*("cri"|'cri'|cri)\s*[.\]]`)

// UsesV1CRIName reports whether a config names the CRI plugin `cri`, the
// layout of containerd 1.0-1.2 that every containerd still migrates to the
// long id. A key written under the long id into such a file collides with
// the file's own table, so writers must use `cri` there.
func UsesV1CRIName(src []byte) bool { return v1CRI.Match(src) }
