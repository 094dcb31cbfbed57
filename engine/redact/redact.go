// Package redact decides which configuration values are credentials and
// must never be shown: in diffs, effective-config changes, reports or logs.
//
// Three rules, applied together:
//   - By key: a value under a credential-looking key (password, token,
//     auth, secret, credentials, api_key, private_key, ... and any key
//     ending in one of them after a '.', '_' or '-', such as client_secret)
//     is hidden, with everything nested under it. Content finds those
//     values by parsing the text as what it is (JSON, TOML, YAML), so a
//     multi-line value or a whole document on one line is hidden whole;
//     text that does not parse falls back to a line-by-line reading.
//     Users add their own names with `--redact NAME` or dotted key paths
//     with `--redact KEY.PATH` (matched at the end of a flattened key).
//   - By value: the values of variables whose names look like credentials
//     (AddVars) are masked wherever they appear, in any text.
//   - By shape: PEM private key blocks and the password of a URL's
//     user:password@ part are hidden wherever they appear.
package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2/unstable"
	"gopkg.in/yaml.v3"
)

// Placeholder replaces every redacted value.
const Placeholder = "<redacted>"

// MinValueLen is the shortest variable value masked wherever it appears:
// masking "on" or "42" in every line would garble the output and hide
// nothing worth hiding. Shorter values are still hidden under credential
// keys and by no_log.
const MinValueLen = 4

// builtin are the credential key names, with '-' written as '_' (names are
// compared that way, so api_key also covers X-Api-Key).
var builtin = []string{
	"auths", "auth", "password", "passwd", "passphrase", "token", "identitytoken", "registrytoken",
	"secret", "credentials", "credential", "apikey", "api_key", "private_key", "privatekey",
	"secret_key", "access_key", "bearer", "authorization",
	// Ansible's connection passwords (ansible_ssh_pass, ...); "pass"
	// alone would take every "PASS:" line of a test's output.
	"ssh_pass", "become_pass", "sudo_pass",
}

var (
	mu    sync.RWMutex
	names = map[string]bool{}
	paths []string
	re    *regexp.Regexp
	// inline finds a credential key inside a line: JSON or an inline
	// table on one line that did not parse, or a message quoting one.
	inline *regexp.Regexp
	// values are the masked variable values (with their quoted forms);
	// masker replaces them, nil when there are none.
	values = map[string]bool{}
	masker *strings.Replacer
	// words are the names' last words, lower case: a line holding none
	// of them needs no pattern run over it.
	words []string
)

// mayHold says whether line may hold a credential key: it has a
// separator and one of the names' words. The patterns are costly on a
// fleet's diffs; most lines fail this first.
func mayHold(line string, ws []string) bool {
	if !strings.ContainsAny(line, "=:") {
		return false
	}
	l := strings.ToLower(line)
	for _, w := range ws {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

func init() {
	for _, n := range builtin {
		names[norm(n)] = true
	}
	compile()
}

// norm is how key names compare: lower case, '-' as '_', no quotes.
func norm(k string) string {
	return strings.ReplaceAll(strings.ToLower(strings.Trim(strings.TrimSpace(k), `"'`)), "-", "_")
}

// Add registers user-listed keys: a word without dots is a key name
// redacted wherever it appears; a dotted path redacts that key (and
// everything under it) wherever the path ends a flattened key.
func Add(keys ...string) {
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
		case strings.Contains(k, "."):
			paths = append(paths, k)
			last := k[strings.LastIndex(k, ".")+1:]
			names[norm(last)] = true
		default:
			names[norm(k)] = true
		}
	}
	compile()
}

// compile rebuilds the line patterns; callers hold mu.
func compile() {
	words = words[:0]
	for n := range names {
		// '-' and '_' compare equal: look for what follows the first.
		w := n
		if i := strings.LastIndexAny(w, "_"); i >= 0 {
			w = w[i+1:]
		}
		if w != "" {
			words = append(words, w)
		}
	}
	var alts []string
	for n := range names {
		alts = append(alts, strings.ReplaceAll(regexp.QuoteMeta(n), "_", "[-_]"))
	}
	sort.Strings(alts)
	words := strings.Join(alts, "|")
	re = regexp.MustCompile(`(?i)^(\s*["']?(?:[A-Za-z0-9_.-]*[._-])?(?:` + words + `)["']?\s*[=:]\s*)(.*)$`)
	inline = regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9_.-])["']?(?:[A-Za-z0-9_.-]*[._-])?(?:` + words + `)["']?\s*[=:]\s*`)
}

// Name reports whether one key names a credential: it is a credential
// name, or ends in one after a '.', '_' or '-' (client_secret, db.password).
func Name(key string) bool {
	k := norm(key)
	mu.RLock()
	defer mu.RUnlock()
	if names[k] {
		return true
	}
	for i := 0; i < len(k); i++ {
		if (k[i] == '_' || k[i] == '.') && names[k[i+1:]] {
			return true
		}
	}
	return false
}

// Segment reports whether one key segment names a credential; it is Name,
// kept for callers that speak of segments.
func Segment(seg string) bool { return Name(seg) }

// Key reports whether a flattened key (segments joined with '.') holds a
// credential: one of its segments is a credential name, or it lies at or
// under a user-listed path.
func Key(key string, segs []string) bool {
	for _, s := range segs {
		if Name(s) {
			return true
		}
	}
	mu.RLock()
	defer mu.RUnlock()
	for _, p := range paths {
		if strings.HasSuffix(key, p) || strings.Contains(key, p+".") {
			return true
		}
	}
	return false
}

// keyPath is Key for a path of segments as a parser found them; segments
// that are not bare words are quoted as in a TOML key.
func keyPath(segs []string) bool {
	parts := make([]string, len(segs))
	for i, s := range segs {
		if s == "" || strings.IndexFunc(s, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) >= 0 {
			parts[i] = strconv.Quote(s)
		} else {
			parts[i] = s
		}
	}
	return Key(strings.Join(parts, "."), segs)
}

// AddValues masks these values wherever they appear from now on (values
// shorter than MinValueLen excepted), also in the quoted forms a view
// prints them in: Go's %q, JSON, and a shell's single quotes.
func AddValues(vals ...string) {
	mu.Lock()
	defer mu.Unlock()
	added := false
	for _, v := range vals {
		if len(v) < MinValueLen {
			continue
		}
		sh := strings.ReplaceAll(v, "'", `'\''`)
		q := strconv.Quote(v)
		var jb bytes.Buffer
		enc := json.NewEncoder(&jb)
		enc.SetEscapeHTML(false)
		js := ""
		if err := enc.Encode(v); err == nil {
			js = strings.TrimSuffix(jb.String(), "\n")
		}
		jh, err := json.Marshal(v)
		if err != nil {
			jh = nil
		}
		for _, form := range []string{v, sh, unquote(q), unquote(js), unquote(string(jh)), unquote(strconv.Quote(sh))} {
			if len(form) >= MinValueLen && !values[form] {
				values[form] = true
				added = true
			}
		}
	}
	if !added {
		return
	}
	all := make([]string, 0, len(values))
	for v := range values {
		all = append(all, v)
	}
	// Longest first: at one position the longer value wins, so a value
	// that contains another is hidden whole.
	sort.Slice(all, func(i, j int) bool {
		if len(all[i]) != len(all[j]) {
			return len(all[i]) > len(all[j])
		}
		return all[i] < all[j]
	})
	pairs := make([]string, 0, 2*len(all))
	for _, v := range all {
		pairs = append(pairs, v, Placeholder)
	}
	masker = strings.NewReplacer(pairs...)
}

func unquote(q string) string {
	if len(q) >= 2 {
		return q[1 : len(q)-1]
	}
	return ""
}

// AddVars masks the values of the variables whose names look like
// credentials (Name), at any depth: every scalar under such a name, as
// text. Booleans and nulls say nothing and are left alone. A fleet's
// variable sets are best given in one call: the masker is rebuilt once.
func AddVars(sets ...map[string]any) {
	var vals []string
	var walk func(v any, secret bool)
	walk = func(v any, secret bool) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(e, secret || Name(k))
			}
		case []any:
			for _, e := range x {
				walk(e, secret)
			}
		case nil, bool:
		case string:
			if secret {
				vals = append(vals, x)
			}
		default:
			if secret {
				vals = append(vals, fmt.Sprint(x))
			}
		}
	}
	for _, vars := range sets {
		walk(map[string]any(vars), false)
	}
	AddValues(vals...)
}

// Values masks the registered variable values in s.
func Values(s string) string {
	mu.RLock()
	m := masker
	mu.RUnlock()
	if m == nil {
		return s
	}
	return m.Replace(s)
}

var jsonString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// JSON masks the registered values in every string of an encoded JSON
// document, whatever escaping the encoder chose for them; the rest of the
// document is kept byte for byte.
func JSON(b []byte) []byte {
	mu.RLock()
	m := masker
	mu.RUnlock()
	if m == nil {
		return b
	}
	return jsonString.ReplaceAllFunc(b, func(lit []byte) []byte {
		var s string
		if err := json.Unmarshal(lit, &s); err != nil {
			return lit
		}
		masked := m.Replace(s)
		if masked == s {
			return lit
		}
		out, err := json.Marshal(masked)
		if err != nil {
			return []byte(`"` + Placeholder + `"`)
		}
		return out
	})
}

var (
	pemBlock = regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`)
	urlPass  = regexp.MustCompile(`(://[^/\s:@"'<>]+:)[^@\s/"'<>]+@`)
)

// shapes hides what is a credential wherever it stands: private key
// blocks and URL passwords, then the registered values.
func shapes(s string) string {
	if strings.Contains(s, "PRIVATE KEY-----") {
		s = pemBlock.ReplaceAllString(s, "-----BEGIN ${1}PRIVATE KEY----- "+Placeholder+" -----END ${1}PRIVATE KEY-----")
	}
	if strings.Contains(s, "://") {
		s = urlPass.ReplaceAllString(s, "${1}"+Placeholder+"@")
	}
	return Values(s)
}

// Text redacts free text (messages, command output, a file of unknown
// format): line by line, a credential key's value is hidden together with
// the lines it continues on (a TOML """ string, a YAML block, an open
// bracket, a backslash continuation, a more-indented block under an empty
// value); JSON within a line is read as JSON; private keys, URL passwords
// and registered values are hidden anywhere.
func Text(s string) string {
	return shapes(lines(s))
}

// Content redacts a file's content for display. name (the file's path)
// picks the format by extension; otherwise JSON, TOML and YAML are tried
// in turn, and a value under a credential key is found by parsing, so it
// is hidden whole wherever it lies. What parses as none of them is read
// line by line (Text).
func Content(name string, b []byte) string {
	if spans, ok := structured(name, b); ok {
		return shapes(inlinePass(replace(b, spans)))
	}
	return Text(string(b))
}

// span is a byte range of the input that holds a credential value.
type span struct{ start, end int }

// structured finds the credential values of b by parsing it; ok is false
// when b is not a document of a format it knows.
func structured(name string, b []byte) ([]span, bool) {
	if !utf8.Valid(b) || len(bytes.TrimSpace(b)) == 0 {
		return nil, false
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".json":
		return jsonSpans(b)
	case ".toml":
		return tomlSpans(b)
	case ".yaml", ".yml":
		return yamlSpans(b)
	}
	if t := bytes.TrimSpace(b); t[0] == '{' || t[0] == '[' {
		if s, ok := jsonSpans(b); ok {
			return s, true
		}
	}
	if s, ok := tomlSpans(b); ok {
		return s, true
	}
	return yamlSpans(b)
}

// replace puts Placeholder, quoted, over each span.
func replace(b []byte, spans []span) string {
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var out strings.Builder
	at := 0
	for _, s := range spans {
		if s.start < at {
			// Nested in a span already replaced.
			continue
		}
		out.Write(b[at:s.start])
		out.WriteString(`"` + Placeholder + `"`)
		at = s.end
	}
	out.Write(b[at:])
	return out.String()
}

// jsonSpans finds the scalars under credential keys of one JSON document.
func jsonSpans(b []byte) ([]span, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	var spans []span
	var value func(path []string, secret bool) error
	value = func(path []string, secret bool) error {
		before := int(d.InputOffset())
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return err
				}
				key, _ := k.(string)
				p := append(path[:len(path):len(path)], key)
				if err := value(p, secret || Name(key) || keyPath(p)); err != nil {
					return err
				}
			}
			_, err = d.Token()
			return err
		case json.Delim('['):
			for d.More() {
				if err := value(path, secret); err != nil {
					return err
				}
			}
			_, err = d.Token()
			return err
		}
		if secret {
			// Between two tokens JSON has only blanks, ':' and ','.
			start := before
			for start < len(b) && strings.IndexByte(" \t\r\n:,", b[start]) >= 0 {
				start++
			}
			spans = append(spans, span{start, int(d.InputOffset())})
		}
		return nil
	}
	if err := value(nil, false); err != nil {
		return nil, false
	}
	return spans, true
}

// tomlSpans finds the scalars under credential keys or tables of a TOML
// document.
func tomlSpans(b []byte) ([]span, bool) {
	var p unstable.Parser
	p.Reset(b)
	var spans []span
	var table []string
	keys := func(it unstable.Iterator) []string {
		var out []string
		for it.Next() {
			out = append(out, string(it.Node().Data))
		}
		return out
	}
	var value func(n *unstable.Node, path []string, secret bool)
	value = func(n *unstable.Node, path []string, secret bool) {
		switch n.Kind {
		case unstable.Array:
			for it := n.Children(); it.Next(); {
				value(it.Node(), path, secret)
			}
		case unstable.InlineTable:
			for it := n.Children(); it.Next(); {
				kv := it.Node()
				if kv.Kind != unstable.KeyValue {
					continue
				}
				p := append(path[:len(path):len(path)], keys(kv.Key())...)
				value(kv.Value(), p, secret || keyPath(p))
			}
		case unstable.Comment:
		default:
			if secret && n.Raw.Length > 0 {
				spans = append(spans, span{int(n.Raw.Offset), int(n.Raw.Offset + n.Raw.Length)})
			}
		}
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keys(e.Key())
		case unstable.KeyValue:
			path := append(table[:len(table):len(table)], keys(e.Key())...)
			value(e.Value(), path, keyPath(path))
		}
	}
	if p.Error() != nil {
		return nil, false
	}
	return spans, true
}

// yamlSpans finds the scalars under credential keys of a YAML stream whose
// documents are mappings or sequences (any text parses as a YAML scalar;
// that is no reason to read it as YAML).
func yamlSpans(b []byte) ([]span, bool) {
	d := yaml.NewDecoder(bytes.NewReader(b))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := d.Decode(&n)
		if err == io.EOF {
			break
		}
		if err != nil || len(docs) > 100 {
			return nil, false
		}
		if len(n.Content) == 0 {
			continue
		}
		if k := n.Content[0].Kind; k != yaml.MappingNode && k != yaml.SequenceNode {
			return nil, false
		}
		docs = append(docs, &n)
	}
	if len(docs) == 0 {
		return nil, false
	}
	// Offsets of line starts: yaml.v3 counts columns in runes.
	lineStart := []int{0}
	for i, c := range b {
		if c == '\n' {
			lineStart = append(lineStart, i+1)
		}
	}
	offset := func(n *yaml.Node) int {
		if n.Line < 1 || n.Line > len(lineStart) {
			return -1
		}
		at := lineStart[n.Line-1]
		for c := 1; c < n.Column && at < len(b); c++ {
			_, w := utf8.DecodeRune(b[at:])
			at += w
		}
		return at
	}
	// Every node's start, so a scalar without an end marker (plain or
	// block) ends where the next node starts.
	var starts []int
	seen := map[*yaml.Node]bool{}
	var all func(n *yaml.Node)
	all = func(n *yaml.Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if o := offset(n); o >= 0 && n.Kind != yaml.DocumentNode {
			starts = append(starts, o)
		}
		for _, c := range n.Content {
			all(c)
		}
	}
	for _, doc := range docs {
		all(doc)
	}
	sort.Ints(starts)
	next := func(o int) int {
		i := sort.SearchInts(starts, o+1)
		if i < len(starts) {
			return starts[i]
		}
		return len(b)
	}
	var spans []span
	done := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node, path []string, secret, flow bool)
	walk = func(n *yaml.Node, path []string, secret, flow bool) {
		if done[n] {
			return
		}
		done[n] = true
		flow = flow || n.Style&yaml.FlowStyle != 0
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, path, secret, flow)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				p := append(path[:len(path):len(path)], k)
				walk(n.Content[i+1], p, secret || Name(k) || keyPath(p), flow)
			}
		case yaml.AliasNode:
			if secret && n.Alias != nil {
				// The credential is where the anchor is.
				delete(done, n.Alias)
				walk(n.Alias, path, true, false)
			}
		case yaml.ScalarNode:
			if !secret || n.Tag == "!!null" && n.Value == "" {
				return
			}
			start := offset(n)
			if start < 0 {
				return
			}
			spans = append(spans, span{start, yamlScalarEnd(b, start, next(start), n, flow)})
		}
	}
	for _, doc := range docs {
		walk(doc, nil, false, false)
	}
	return spans, true
}

// yamlScalarEnd is where the scalar n that starts at start ends; limit is
// where the next node starts.
func yamlScalarEnd(b []byte, start, limit int, n *yaml.Node, flow bool) int {
	at := start
	// An anchor or a tag stands before the scalar itself.
	for at < limit && (b[at] == '&' || b[at] == '!') {
		for at < limit && b[at] != ' ' && b[at] != '\t' && b[at] != '\n' {
			at++
		}
		for at < limit && (b[at] == ' ' || b[at] == '\t' || b[at] == '\r' || b[at] == '\n') {
			at++
		}
	}
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0 && at < limit && b[at] == '"':
		for i := at + 1; i < limit; i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return limit
	case n.Style&yaml.SingleQuotedStyle != 0 && at < limit && b[at] == '\'':
		for i := at + 1; i < limit; i++ {
			if b[i] == '\'' {
				if i+1 < limit && b[i+1] == '\'' {
					i++
					continue
				}
				return i + 1
			}
		}
		return limit
	}
	end := limit
	region := b[at:end]
	// A document marker ends any scalar.
	for _, m := range [][]byte{[]byte("\n---"), []byte("\n...")} {
		if i := bytes.Index(region, m); i >= 0 {
			region = region[:i]
		}
	}
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		// A block scalar's lines are indented at least as its first
		// one; a less indented line after them (a comment) is not its.
		if nl := bytes.IndexByte(region, '\n'); nl >= 0 {
			ind := -1
			at := nl + 1
			for at < len(region) {
				end := bytes.IndexByte(region[at:], '\n')
				if end < 0 {
					end = len(region) - at
				}
				l := region[at : at+end]
				if t := bytes.TrimLeft(l, " "); len(bytes.TrimSpace(t)) > 0 {
					li := len(l) - len(t)
					if ind < 0 {
						ind = li
					} else if li < ind {
						region = region[:at]
						break
					}
				}
				at += end + 1
			}
		}
	} else {
		// A plain scalar ends at a comment, and in a flow collection at
		// the next indicator.
		for i := 1; i < len(region); i++ {
			if region[i] == '#' && (region[i-1] == ' ' || region[i-1] == '\t' || region[i-1] == '\n') {
				region = region[:i]
				break
			}
		}
		if flow {
			if i := bytes.IndexAny(region, ",[]{}"); i >= 0 {
				region = region[:i]
			}
		} else if i := bytes.Index(region, []byte("\n-")); i >= 0 {
			// The next item of a sequence of plain scalars.
			region = region[:i]
		}
	}
	region = bytes.TrimRight(region, " \t\r\n")
	return at + len(region)
}

// inlinePass hides, in parsed text, a credential key that stands inside a
// value or a comment (Environment="REGISTRY_TOKEN=...", # password: ...),
// which the parser saw as text: from the key to the end of the line. A
// key with an empty value or a block after it is left: the parser has
// dealt with what it holds.
func inlinePass(s string) string {
	if !strings.ContainsAny(s, "=:") {
		return s
	}
	mu.RLock()
	in, ws := inline, words
	mu.RUnlock()
	ls := strings.SplitAfter(s, "\n")
	for i, l := range ls {
		if !mayHold(l, ws) {
			continue
		}
		body := strings.TrimRight(l, "\r\n")
		from := 0
		if j := strings.LastIndex(body, Placeholder); j >= 0 {
			from = j + len(Placeholder)
		}
		loc := in.FindStringIndex(body[from:])
		if loc == nil {
			continue
		}
		v := strings.TrimSpace(body[from+loc[1]:])
		if v == "" || blockIndicator.MatchString(v) {
			continue
		}
		ls[i] = body[:from+loc[1]] + `"` + Placeholder + `"` + l[len(body):]
	}
	return strings.Join(ls, "")
}

// lines is the line-by-line reading of Text, before shapes.
func lines(s string) string {
	if !strings.ContainsAny(s, "=:") {
		return s
	}
	mu.RLock()
	line, in, ws := re, inline, words
	mu.RUnlock()
	ls := strings.SplitAfter(s, "\n")
	var out strings.Builder
	for i := 0; i < len(ls); i++ {
		l := ls[i]
		if !mayHold(l, ws) {
			out.WriteString(l)
			continue
		}
		body := strings.TrimRight(l, "\r\n")
		nl := l[len(body):]
		if j := strings.IndexAny(body, "{["); j >= 0 {
			if spans, ok := jsonSpans([]byte(body[j:])); ok && len(spans) > 0 {
				out.WriteString(body[:j] + replace([]byte(body[j:]), spans) + nl)
				continue
			}
		}
		if m := line.FindStringSubmatchIndex(body); m != nil {
			out.WriteString(body[:m[3]] + `"` + Placeholder + `"` + nl)
			i = continuation(ls, i, indent(body), body[m[4]:])
			continue
		}
		if loc := in.FindStringIndex(body); loc != nil {
			out.WriteString(body[:loc[1]] + `"` + Placeholder + `"` + nl)
			i = continuation(ls, i, indent(body), body[loc[1]:])
			continue
		}
		out.WriteString(l)
	}
	return out.String()
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " \t")) }

var blockIndicator = regexp.MustCompile(`^[|>][-+0-9]*\s*(#.*)?$`)

// continuation returns the index of the last line that belongs to the
// value v that starts on line i (indented ind): the lines a reader of the
// text would take as part of it.
func continuation(ls []string, i, ind int, v string) int {
	v = strings.TrimSpace(v)
	body := func(j int) string { return strings.TrimRight(ls[j], "\r\n") }
	const most = 100000
	switch {
	case strings.HasPrefix(v, `"""`) || strings.HasPrefix(v, `'''`):
		delim := v[:3]
		if strings.Contains(v[3:], delim) {
			return i
		}
		for j := i + 1; j < len(ls) && j-i < most; j++ {
			if strings.Contains(ls[j], delim) {
				return j
			}
		}
		return len(ls) - 1
	case strings.HasPrefix(v, `"`) && !closedQuote(v[1:]):
		for j := i + 1; j < len(ls) && j-i < most; j++ {
			if closedQuote(ls[j]) {
				return j
			}
		}
		return len(ls) - 1
	case strings.HasPrefix(v, "[") || strings.HasPrefix(v, "{"):
		depth := brackets(v)
		j := i
		for depth > 0 && j+1 < len(ls) && j-i < most {
			j++
			depth += brackets(ls[j])
		}
		return j
	case strings.HasSuffix(v, `\`):
		j := i
		for j+1 < len(ls) && j-i < most {
			j++
			if !strings.HasSuffix(body(j), `\`) {
				break
			}
		}
		return j
	case v == "" || blockIndicator.MatchString(v):
		// A nested block or a YAML block scalar: the more-indented
		// lines that follow (blank lines inside it too).
		last := i
		for j := i + 1; j < len(ls) && j-i < most; j++ {
			b := body(j)
			if strings.TrimSpace(b) == "" {
				continue
			}
			if indent(b) <= ind {
				break
			}
			last = j
		}
		return last
	}
	return i
}

// closedQuote says whether s holds an unescaped '"'.
func closedQuote(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return true
		}
	}
	return false
}

// brackets is the change in bracket depth over s, outside strings.
func brackets(s string) int {
	d := 0
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == '\\' {
				i++
			} else if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		case c == '[' || c == '{':
			d++
		case c == ']' || c == '}':
			d--
		}
	}
	return d
}
