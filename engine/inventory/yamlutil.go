package inventory

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/yamlx"
)

// Error is a problem in an inventory file, located by the YAML node or
// INI line that caused it so the user can jump straight to it.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

// Error formats the problem as "file:line:col: msg" ("file:line: msg"
// when the column is not known, as in INI files), the form editors and
// terminals turn into links.
func (e *Error) Error() string {
	if e.Col == 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

func nodeErr(file string, n *yaml.Node, format string, a ...any) *Error {
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
	return &Error{File: file, Line: line, Col: col, Msg: fmt.Sprintf(format, a...)}
}

// parseYAML parses one YAML document, locating syntax errors in file.
func parseYAML(file string, data []byte) (*yaml.Node, error) {
	doc, serr := yamlx.Parse(data)
	if serr != nil {
		return nil, &Error{File: file, Line: serr.Line, Col: serr.Col, Msg: "invalid YAML: " + serr.Msg}
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
