// Package yamlx holds the YAML-position and typo-suggestion helpers that the
// inventory and playbook loaders share. It knows nothing about either file
// format: callers wrap its results in their own located Error types, so each
// loader keeps its own error wording while the mechanics live in one place.
package yamlx

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	goyaml "github.com/goccy/go-yaml"
	gyparser "github.com/goccy/go-yaml/parser"
	"gopkg.in/yaml.v3"
)

// SyntaxError is a YAML syntax error at the line and column of the
// problem.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

// Error formats the problem as "line:col: msg"; callers usually prefix the
// file name through their own error type instead.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg)
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Parse parses one YAML document. yaml.v3 decides what is valid, but its
// message names the line where the enclosing construct started (its parser's
// context mark, off by one), not the problem's: "- b" under a mapping on
// line 5 is reported at line 1. So a document yaml.v3 refuses is parsed
// again with goccy/go-yaml, only to locate it, and that parser's line and
// column are reported when they lie at or after yaml.v3's line (the problem
// cannot come before the construct it is in). Otherwise yaml.v3's line
// stands, and the column points at the first tab on it, the most common
// cause of "cannot start any token".
func Parse(data []byte) (*yaml.Node, *SyntaxError) {
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
	}
	if l, c, ok := locate(data); ok && l >= line {
		line, col = l, c
	} else {
		col = 1
	}
	lines := strings.Split(string(data), "\n")
	if line >= 1 && line <= len(lines) {
		if i := strings.IndexByte(lines[line-1], '\t'); i >= 0 && (col == 1 || col == i+1) {
			col = i + 1
			msg += " (a tab: YAML indentation must use spaces)"
		}
	}
	return nil, &SyntaxError{Line: line, Col: col, Msg: msg}
}

// locate is where goccy/go-yaml's parser finds the first syntax error in
// data; ok is false when it finds none (it accepts some documents yaml.v3
// refuses) or cannot say where.
func locate(data []byte) (line, col int, ok bool) {
	_, err := gyparser.ParseBytes(data, 0)
	var se *goyaml.SyntaxError
	if !errors.As(err, &se) || se.Token == nil || se.Token.Position == nil || se.Token.Position.Line < 1 {
		return 0, 0, false
	}
	return se.Token.Position.Line, max(se.Token.Position.Column, 1), true
}

// Deref follows aliases so callers see the anchored node. The depth bound
// protects against self-referencing anchors, which yaml.v3 can produce; such
// a cycle yields nil.
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// IsNull reports whether n is absent or an explicit YAML null, both of which
// the loaders treat as "not given".
func IsNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// KindName describes n for "expected X, got Y" messages, quoting strings so
// the user can see exactly what was parsed.
func KindName(n *yaml.Node) string {
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

// DecodeValue turns a YAML node into plain Go values with string map keys,
// so vars can be merged, compared and marshalled to JSON. The error, if any,
// is about n itself: its message is meant to be located at n by the caller,
// and for type errors it joins yaml.v3's per-field messages.
func DecodeValue(n *yaml.Node) (any, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, errors.New(strings.Join(te.Errors, "; "))
		}
		return nil, err
	}
	return Normalize(v), nil
}

// Normalize rewrites map[any]any (which yaml.v3 produces for non-string
// keys) into map[string]any, recursively, so values marshal to JSON.
func Normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = Normalize(e)
		}
		return t
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = Normalize(e)
		}
		return out
	case []any:
		for i, e := range t {
			t[i] = Normalize(e)
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

// Suggest returns the closest candidate when it is close enough to be a
// plausible typo, "" otherwise. Ties go to the earliest candidate, so callers
// control the preference by ordering.
func Suggest(word string, candidates []string) string {
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

// DidYouMean returns " (did you mean X?)" for the Suggest result, or "" when
// nothing is close, so it can be appended to any message unconditionally.
func DidYouMean(word string, candidates []string) string {
	if s := Suggest(word, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %s?)", s)
	}
	return ""
}

// ShellWords splits on blanks, honouring single and double quotes the way a
// POSIX shell does for simple quoting. Ansible hands ansible_ssh_common_args
// to ssh this way, and -e 'msg="a b" n=1' gives two variables.
func ShellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote = r
			inWord = true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
