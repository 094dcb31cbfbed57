package playbook

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/yamlx"
)

// Pos is a place in a playbook file.
type Pos struct {
	File      string
	Line, Col int
}

// String formats the position as "file:line:col".
func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Error is a problem in a playbook, at the YAML node that caused it.
type Error struct {
	Pos Pos
	Msg string
}

// Error formats the problem as "file:line:col: msg", the form editors and
// terminals turn into links.
func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

func posOf(file string, n *yaml.Node) Pos {
	if n != nil && n.Line > 0 {
		return Pos{File: file, Line: n.Line, Col: n.Column}
	}
	return Pos{File: file, Line: 1, Col: 1}
}

func nodeErr(file string, n *yaml.Node, format string, a ...any) *Error {
	return &Error{Pos: posOf(file, n), Msg: fmt.Sprintf(format, a...)}
}

// parseYAML parses one YAML document, locating syntax errors in file.
func parseYAML(file string, data []byte) (*yaml.Node, error) {
	doc, serr := yamlx.Parse(data)
	if serr != nil {
		return nil, &Error{Pos: Pos{File: file, Line: serr.Line, Col: serr.Col}, Msg: "invalid YAML: " + serr.Msg}
	}
	return doc, nil
}

// decodeValue is yamlx.DecodeValue with the error located at n in file.
func decodeValue(file string, n *yaml.Node) (any, error) {
	v, err := yamlx.DecodeValue(n)
	if err != nil {
		return nil, nodeErr(file, n, "%v", err)
	}
	return v, nil
}

// Errors is every problem the loader found in a playbook, in the order of
// the file. It unwraps to each *Error.
type Errors struct {
	List []*Error
}

// Error prints one problem per line, each starting with file:line:col.
func (e *Errors) Error() string {
	lines := make([]string, len(e.List))
	for i, x := range e.List {
		lines[i] = x.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives each problem to errors.Is and errors.As.
func (e *Errors) Unwrap() []error {
	out := make([]error, len(e.List))
	for i, x := range e.List {
		out[i] = x
	}
	return out
}
