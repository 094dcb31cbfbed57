package jinja

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
	"gopkg.in/yaml.v3"
)

// ansibleFilters are the Ansible filters playbooks use most, on top of
// Jinja2's own.
var ansibleFilters = map[string]exec.FilterFunction{
	"bool":          filterBool,
	"regex_replace": filterRegexReplace,
	"regex_search":  filterRegexSearch,
	"regex_escape":  stringFilter(regexp.QuoteMeta),
	"to_json": func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
		return valueOrErr(in, toJSON(native(in), false))
	},
	"to_nice_json": func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
		return valueOrErr(in, toJSON(native(in), true))
	},
	"to_yaml": func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
		return valueOrErr(in, toYAML(native(in)))
	},
	"to_nice_yaml": func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
		return valueOrErr(in, toYAML(native(in)))
	},
	"from_json":   filterFromJSON,
	"from_yaml":   filterFromYAML,
	"b64encode":   stringFilter(func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }),
	"b64decode":   filterB64Decode,
	"basename":    stringFilter(path.Base),
	"dirname":     stringFilter(path.Dir),
	"quote":       stringFilter(shellQuote),
	"mandatory":   filterMandatory,
	"ternary":     filterTernary,
	"dict2items":  filterDict2Items,
	"items2dict":  filterItems2Dict,
	"combine":     filterCombine,
	"flatten":     filterFlatten,
	"split":       filterSplit,
	"subelements": filterSubelements,
	"comment":     filterComment,
}

// allFilterNames is every name Filters may list.
func allFilterNames() []string {
	var out []string
	for n := range ansibleFilters {
		out = append(out, n)
	}
	for _, n := range builtinFilterNames {
		if _, ours := ansibleFilters[n]; !ours {
			out = append(out, n)
		}
	}
	return out
}

// builtinFilterNames are Jinja2's filters as gonja has them (its set does
// not list its names).
var builtinFilterNames = []string{"abs", "attr", "batch", "capitalize", "center", "default", "d", "dictsort", "e", "escape",
	"filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "join", "items", "last", "length",
	"count", "list", "lower", "map", "max", "min", "pprint", "random", "rejectattr", "reject", "replace", "reverse", "round",
	"safe", "selectattr", "select", "slice", "sort", "string", "striptags", "sum", "title", "tojson", "trim", "truncate",
	"unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"}

func valueOrErr(in *exec.Value, out any) *exec.Value {
	if in.IsError() {
		return in
	}
	return exec.AsValue(out)
}

func stringFilter(f func(string) string) exec.FilterFunction {
	return func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return in
		}
		return exec.AsValue(f(Text(native(in))))
	}
}

func errValue(format string, a ...any) *exec.Value {
	return exec.AsValue(fmt.Errorf(format, a...))
}

func arg(params *exec.VarArgs, i int, kw string) *exec.Value {
	if i < len(params.Args) {
		return params.Args[i]
	}
	if v, ok := params.KwArgs[kw]; ok {
		return v
	}
	return nil
}

// filterBool is Ansible's bool: yes/on/1/true (any case) are true.
func filterBool(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	switch x := native(in).(type) {
	case bool:
		return exec.AsValue(x)
	case nil:
		return exec.AsValue(false)
	case int:
		return exec.AsValue(x == 1)
	case float64:
		return exec.AsValue(x == 1)
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "yes", "on", "1", "true", "y", "t":
			return exec.AsValue(true)
		}
		return exec.AsValue(false)
	}
	return exec.AsValue(false)
}

// pyRegexp compiles a Python regular expression with the ignorecase and
// multiline keyword arguments of Ansible's regex filters and tests: named
// groups (?P<n>) are Go's too; \1 in a replacement is ${1}.
func pyRegexp(pat *exec.Value, params *exec.VarArgs) (*regexp.Regexp, error) {
	flags := ""
	if ic := arg(params, 99, "ignorecase"); ic != nil && ic.IsTrue() {
		flags += "i"
	}
	if ml := arg(params, 99, "multiline"); ml != nil && ml.IsTrue() {
		flags += "m"
	}
	s := pat.String()
	if flags != "" {
		s = "(?" + flags + ")" + s
	}
	return regexp.Compile(s)
}

var backrefRe = regexp.MustCompile(`\\(\d+)|\\g<(\w+)>`)

func filterRegexReplace(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	pat, rep := arg(params, 0, "regex"), arg(params, 1, "replace")
	if pat == nil {
		return errValue("regex_replace needs a pattern")
	}
	re, err := pyRegexp(pat, params)
	if err != nil {
		return errValue("regex_replace: %v", err)
	}
	r := ""
	if rep != nil {
		r = rep.String()
	}
	r = strings.ReplaceAll(r, "$", "$$")
	r = backrefRe.ReplaceAllStringFunc(r, func(m string) string {
		sm := backrefRe.FindStringSubmatch(m)
		if sm[1] != "" {
			return "${" + sm[1] + "}"
		}
		return "${" + sm[2] + "}"
	})
	return exec.AsValue(re.ReplaceAllString(Text(native(in)), r))
}

func filterRegexSearch(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	pat := arg(params, 0, "regex")
	if pat == nil {
		return errValue("regex_search needs a pattern")
	}
	re, err := pyRegexp(pat, params)
	if err != nil {
		return errValue("regex_search: %v", err)
	}
	m := re.FindString(Text(native(in)))
	if m == "" && !re.MatchString(Text(native(in))) {
		return exec.AsValue(nil)
	}
	return exec.AsValue(m)
}

func toJSON(v any, nice bool) string {
	var b []byte
	var err error
	if nice {
		b, err = json.MarshalIndent(sortable(v), "", "    ")
	} else {
		b, err = json.Marshal(sortable(v))
	}
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// sortable turns maps with non-string keys into string-keyed maps so JSON
// can encode them.
func sortable(v any) any {
	switch x := v.(type) {
	case map[any]any:
		out := map[string]any{}
		for k, val := range x {
			out[fmt.Sprint(k)] = sortable(val)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			out[k] = sortable(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = sortable(val)
		}
		return out
	}
	return v
}

func toYAML(v any) string {
	b, err := yaml.Marshal(sortable(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func filterFromJSON(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var out any
	if err := json.Unmarshal([]byte(in.String()), &out); err != nil {
		return errValue("from_json: %v", err)
	}
	return exec.AsValue(out)
}

func filterFromYAML(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var out any
	if err := yaml.Unmarshal([]byte(in.String()), &out); err != nil {
		return errValue("from_yaml: %v", err)
	}
	return exec.AsValue(sortable(out))
}

func filterB64Decode(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(in.String()))
	if err != nil {
		return errValue("b64decode: %v", err)
	}
	return exec.AsValue(string(b))
}

// shellQuote is Python's shlex.quote, which Ansible's quote filter is:
// '=' is safe and ' becomes '"'"'. transport.ShellQuote, which the shell
// module's cmd uses, also quotes '=' (a leading NAME=x is an assignment),
// so the filter keeps its own to print what Ansible prints.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./-_", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

func filterMandatory(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() || in.IsNil() {
		if msg := arg(params, 0, "msg"); msg != nil {
			return errValue("%s", msg.String())
		}
		return errValue("mandatory variable not defined")
	}
	return in
}

func filterTernary(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	t, f := arg(params, 0, "true_val"), arg(params, 1, "false_val")
	if t == nil || f == nil {
		return errValue("ternary needs a true and a false value")
	}
	if in.IsNil() {
		if n := arg(params, 2, "none_val"); n != nil {
			return n
		}
	}
	if Truth(native(in)) {
		return t
	}
	return f
}

// keyValueNames reads dict2items/items2dict's key_name and value_name
// arguments (Ansible's defaults: key, value).
func keyValueNames(params *exec.VarArgs) (string, string) {
	kn, vn := "key", "value"
	if k := arg(params, 99, "key_name"); k != nil {
		kn = k.String()
	}
	if v := arg(params, 99, "value_name"); v != nil {
		vn = v.String()
	}
	return kn, vn
}

func filterDict2Items(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	kn, vn := keyValueNames(params)
	m, ok := native(in).(map[string]any)
	if !ok {
		return errValue("dict2items needs a mapping")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]any, 0, len(m))
	for _, k := range keys {
		out = append(out, map[string]any{kn: k, vn: m[k]})
	}
	return exec.AsValue(out)
}

func filterItems2Dict(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	kn, vn := keyValueNames(params)
	list, ok := native(in).([]any)
	if !ok {
		return errValue("items2dict needs a list")
	}
	out := map[string]any{}
	for _, it := range list {
		m, ok := it.(map[string]any)
		if !ok {
			return errValue("items2dict: each item must be a mapping with %s and %s", kn, vn)
		}
		out[Text(m[kn])] = m[vn]
	}
	return exec.AsValue(out)
}

func filterCombine(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	rec := arg(params, 99, "recursive")
	out := map[string]any{}
	merge := func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		combine(out, m, rec != nil && rec.IsTrue())
		return true
	}
	if !merge(native(in)) {
		return errValue("combine needs mappings")
	}
	for _, p := range params.Args {
		if !merge(native(p)) {
			return errValue("combine needs mappings")
		}
	}
	return exec.AsValue(out)
}

func combine(dst, src map[string]any, recursive bool) {
	for k, v := range src {
		if recursive {
			if dm, ok := dst[k].(map[string]any); ok {
				if sm, ok := v.(map[string]any); ok {
					n := map[string]any{}
					combine(n, dm, true)
					combine(n, sm, true)
					dst[k] = n
					continue
				}
			}
		}
		dst[k] = v
	}
}

func filterFlatten(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	levels := -1
	if l := arg(params, 0, "levels"); l != nil {
		levels = l.Integer()
	}
	list, ok := native(in).([]any)
	if !ok {
		return errValue("flatten needs a list")
	}
	return exec.AsValue(flatten(list, levels))
}

// filterSubelements is Ansible's subelements: for each mapping of the
// list, one [mapping, item] pair per item of its list under key (a
// dotted path); a mapping without it is an error unless skip_missing.
func filterSubelements(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	k := arg(params, 0, "subelement")
	if k == nil {
		return errValue("subelements needs the name of the list")
	}
	skip := false
	if s := arg(params, 1, "skip_missing"); s != nil {
		skip = Truth(native(s))
	}
	var elems []any
	switch x := native(in).(type) {
	case []any:
		elems = x
	case map[string]any:
		for _, key := range sortedMapKeys(x) {
			elems = append(elems, x[key])
		}
	default:
		return errValue("subelements needs a list of mappings")
	}
	path := strings.Split(k.String(), ".")
	out := []any{}
	for _, e := range elems {
		var cur any = e
		missing := false
		for _, p := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				missing = true
				break
			}
			if cur, ok = m[p]; !ok {
				missing = true
				break
			}
		}
		if missing {
			if skip {
				continue
			}
			return errValue("subelements: could not find %q in an element", k.String())
		}
		sub, ok := cur.([]any)
		if !ok {
			return errValue("subelements: %q of an element is not a list", k.String())
		}
		for _, it := range sub {
			out = append(out, []any{e, it})
		}
	}
	return exec.AsValue(out)
}

func sortedMapKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func flatten(list []any, levels int) []any {
	var out []any
	for _, it := range list {
		if sub, ok := it.([]any); ok && levels != 0 {
			out = append(out, flatten(sub, levels-1)...)
			continue
		}
		if it != nil {
			out = append(out, it)
		}
	}
	return out
}

func filterSplit(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	s := Text(native(in))
	var parts []string
	if sep := arg(params, 0, "sep"); sep != nil && !sep.IsNil() {
		parts = strings.Split(s, sep.String())
	} else {
		parts = strings.Fields(s)
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return exec.AsValue(out)
}

// ansibleTests are Ansible's tests on task results and strings.
var ansibleTests = map[string]exec.TestFunction{
	"succeeded":       resultTest(func(r map[string]any) bool { return !Truth(r["failed"]) }),
	"success":         resultTest(func(r map[string]any) bool { return !Truth(r["failed"]) }),
	"failed":          resultTest(func(r map[string]any) bool { return Truth(r["failed"]) }),
	"failure":         resultTest(func(r map[string]any) bool { return Truth(r["failed"]) }),
	"changed":         resultTest(func(r map[string]any) bool { return Truth(r["changed"]) }),
	"change":          resultTest(func(r map[string]any) bool { return Truth(r["changed"]) }),
	"skipped":         resultTest(func(r map[string]any) bool { return Truth(r["skipped"]) }),
	"skip":            resultTest(func(r map[string]any) bool { return Truth(r["skipped"]) }),
	"match":           regexTest(func(re *regexp.Regexp, s string) bool { loc := re.FindStringIndex(s); return loc != nil && loc[0] == 0 }),
	"search":          regexTest(func(re *regexp.Regexp, s string) bool { return re.MatchString(s) }),
	"regex":           regexTest(func(re *regexp.Regexp, s string) bool { return re.MatchString(s) }),
	"version":         testVersion,
	"version_compare": testVersion,
}

func resultTest(f func(map[string]any) bool) exec.TestFunction {
	return func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
		m, ok := native(in).(map[string]any)
		if !ok {
			return false, fmt.Errorf("the test needs a task result (a registered variable), got %s", Text(native(in)))
		}
		return f(m), nil
	}
}

// untuple spreads the arguments of a test called with several
// (gonja passes `is version('1.7', '>=')` as one tuple).
func untuple(params *exec.VarArgs) *exec.VarArgs {
	if len(params.Args) != 1 || !params.Args[0].IsList() {
		return params
	}
	list, ok := native(params.Args[0]).([]any)
	if !ok {
		return params
	}
	out := &exec.VarArgs{KwArgs: params.KwArgs}
	for _, v := range list {
		out.Args = append(out.Args, exec.AsValue(v))
	}
	return out
}

func regexTest(f func(*regexp.Regexp, string) bool) exec.TestFunction {
	return func(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
		params = untuple(params)
		pat := arg(params, 0, "pattern")
		if pat == nil {
			return false, fmt.Errorf("the test needs a pattern")
		}
		re, err := pyRegexp(pat, params)
		if err != nil {
			return false, err
		}
		return f(re, Text(native(in))), nil
	}
}

// testVersion compares dotted versions numerically part by part (a
// non-numeric part compares as text), as LooseVersion mostly does.
func testVersion(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	params = untuple(params)
	other := arg(params, 0, "version")
	if other == nil {
		return false, fmt.Errorf("version needs a version to compare with")
	}
	op := "=="
	if o := arg(params, 1, "operator"); o != nil {
		op = o.String()
	}
	c := compareVersions(Text(native(in)), Text(native(other)))
	switch op {
	case "==", "=", "eq":
		return c == 0, nil
	case "!=", "<>", "ne":
		return c != 0, nil
	case "<", "lt":
		return c < 0, nil
	case "<=", "le":
		return c <= 0, nil
	case ">", "gt":
		return c > 0, nil
	case ">=", "ge":
		return c >= 0, nil
	}
	return false, fmt.Errorf("version: unknown operator %q", op)
}

var versionPartRe = regexp.MustCompile(`\d+|[A-Za-z]+`)

func compareVersions(a, b string) int {
	pa, pb := versionPartRe.FindAllString(a, -1), versionPartRe.FindAllString(b, -1)
	for i := 0; i < len(pa) || i < len(pb); i++ {
		if i >= len(pa) {
			return -1
		}
		if i >= len(pb) {
			return 1
		}
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		switch {
		case ea == nil && eb == nil:
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
		case pa[i] != pb[i]:
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// lookup is Ansible's lookup() for the plugins that need nothing but the
// controller and the variables: env (the controller's environment, ""
// when unset, as Ansible) and vars (a variable by a name computed in the
// template, with default=). Several terms give their values joined by
// commas, as Ansible's lookup does (wantlist=True gives the list).
func lookup(e *exec.Evaluator, params *exec.VarArgs) (any, error) {
	vals, err := lookupValues(e, params)
	if err != nil {
		return nil, err
	}
	if w, ok := params.KwArgs["wantlist"]; ok && Truth(native(w)) {
		return vals, nil
	}
	if len(vals) == 1 {
		return vals[0], nil
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = Text(v)
	}
	return strings.Join(parts, ","), nil
}

// query is Ansible's query() (and q()): lookup's values as a list.
func query(e *exec.Evaluator, params *exec.VarArgs) (any, error) {
	return lookupValues(e, params)
}

func lookupValues(e *exec.Evaluator, params *exec.VarArgs) ([]any, error) {
	if len(params.Args) == 0 {
		return nil, fmt.Errorf("lookup needs a plugin name")
	}
	plugin := params.Args[0].String()
	terms := params.Args[1:]
	out := []any{}
	switch plugin {
	case "env", "ansible.builtin.env":
		for _, t := range terms {
			v, ok := os.LookupEnv(t.String())
			if !ok {
				if d, has := params.KwArgs["default"]; has {
					out = append(out, native(d))
					continue
				}
			}
			out = append(out, v)
		}
	case "vars", "ansible.builtin.vars":
		for _, t := range terms {
			v, ok := e.Environment.Context.Get(t.String())
			if !ok {
				if d, has := params.KwArgs["default"]; has {
					out = append(out, native(d))
					continue
				}
				return nil, fmt.Errorf("lookup('vars'): No variable found with this name: %s", t.String())
			}
			out = append(out, native(exec.ToValue(v)))
		}
	case "file", "ansible.builtin.file":
		return lookupFile(e, params, terms)
	case "template", "ansible.builtin.template":
		return lookupTemplate(e, terms)
	case "first_found", "ansible.builtin.first_found":
		return lookupFirstFound(e, params, terms)
	default:
		return nil, fmt.Errorf("lookup plugin %q is not supported (env, vars, file, template and first_found are)", plugin)
	}
	return out, nil
}

// commentStyles are Ansible's comment filter styles: what starts and ends
// the block and what starts each line.
var commentStyles = map[string]map[string]string{
	"plain":  {"decoration": "# "},
	"erlang": {"decoration": "% "},
	"c":      {"decoration": "// "},
	"cblock": {"beginning": "/*", "decoration": " * ", "end": " */"},
	"xml":    {"beginning": "<!--", "decoration": " - ", "end": "-->"},
}

// filterComment is Ansible's comment filter, step for step (templates put
// `{{ ansible_managed | comment }}` at the top of a file): the text with
// each line decorated, between a prefix and a postfix line.
func filterComment(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	style := "plain"
	if s := arg(params, 0, "style"); s != nil {
		style = s.String()
	}
	sp, ok := commentStyles[style]
	if !ok {
		return errValue("comment: unknown style %q (plain, erlang, c, cblock, xml)", style)
	}
	kw := func(name string) (string, bool) {
		if v := arg(params, 99, name); v != nil {
			return v.String(), true
		}
		return "", false
	}
	prepost := sp["decoration"]
	if d, ok := kw("decoration"); ok {
		prepost = d
	}
	p := map[string]string{
		"newline": "\n", "beginning": "", "prefix": strings.TrimRight(prepost, " \t\n\r"), "prefix_count": "1",
		"decoration": "", "postfix": strings.TrimRight(prepost, " \t\n\r"), "postfix_count": "1", "end": "",
	}
	for k, v := range sp {
		p[k] = v
	}
	for k := range p {
		if v, ok := kw(k); ok {
			p[k] = v
		}
	}
	count := func(k string) (int, error) {
		n, err := strconv.Atoi(p[k])
		if err != nil || n < 0 || n > 100 {
			return 0, fmt.Errorf("comment: %s %q is not a small count", k, p[k])
		}
		return n, nil
	}
	pre, err := count("prefix_count")
	if err != nil {
		return errValue("%v", err)
	}
	post, err := count("postfix_count")
	if err != nil {
		return errValue("%v", err)
	}
	nl, dec := p["newline"], p["decoration"]
	var b strings.Builder
	if p["beginning"] != "" {
		b.WriteString(p["beginning"] + nl)
	}
	if p["prefix"] != "" {
		unit := p["prefix"] + nl
		if p["prefix"] == nl {
			unit = nl
		}
		b.WriteString(strings.Repeat(unit, pre))
	}
	text := dec + strings.ReplaceAll(in.String(), nl, nl+dec)
	b.WriteString(strings.ReplaceAll(text, dec+nl, strings.TrimRight(dec, " \t\n\r")+nl))
	for i := 0; i < post; i++ {
		b.WriteString(nl + p["postfix"])
	}
	if p["end"] != "" {
		b.WriteString(nl + p["end"])
	}
	return exec.AsValue(b.String())
}
