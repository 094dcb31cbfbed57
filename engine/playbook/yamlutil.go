package playbook

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
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

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML parses one YAML document and turns yaml.v3's syntax errors,
// which carry only a line, into an Error with a column. A tab is the most
// common cause of "cannot start any token", so the column points at it.
func parseYAML(file string, data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	err := yaml.Unmarshal(data, &doc)
	if err == nil {
		return &doc, nil
	}
	line, col, msg := 1, 1, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		if l, convErr := strconv.Atoi(m[1]); convErr == nil {
			line = l
		}
		msg = m[2]
		lines := strings.Split(string(data), "\n")
		if line >= 1 && line <= len(lines) {
			if i := strings.IndexByte(lines[line-1], '\t'); i >= 0 {
				col = i + 1
				msg += " (a tab: YAML indentation must use spaces)"
			}
		}
	}
	return nil, &Error{Pos: Pos{File: file, Line: line, Col: col}, Msg: "invalid YAML: " + msg}
}

// deref follows aliases so callers see the anchored node. The depth bound
// protects against self-referencing anchors, which yaml.v3 can produce.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func kindName(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		default:
			return fmt.Sprintf("the value %s", n.Value)
		}
	}
	return "an unsupported node"
}

// decodeValue turns a YAML node into plain Go values with string map keys,
// so vars can be merged, compared and marshalled to JSON.
func decodeValue(file string, n *yaml.Node) (any, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, nodeErr(file, n, "%s", strings.Join(te.Errors, "; "))
		}
		return nil, nodeErr(file, n, "%v", err)
	}
	return normalize(v), nil
}

func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalize(e)
		}
		return t
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
		return t
	}
	return v
}

// distance is the optimal string alignment distance: Levenshtein plus
// adjacent transpositions, which is how most typos look ("dset").
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// suggest returns the closest candidate when it is close enough to be a
// plausible typo, "" otherwise.
func suggest(word string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := distance(word, c)
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(len([]rune(word)), len([]rune(best))) / 2
	if best == "" || bestD > 4 || bestD > limit {
		return ""
	}
	return best
}

func didYouMean(word string, candidates []string) string {
	if s := suggest(word, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %s?)", s)
	}
	return ""
}
