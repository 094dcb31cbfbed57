package nvidiatoml

// Repeat is a table header written twice in one file, as a block pasted
// twice with >> writes it.
type Repeat struct {
	// Header is the header as written, e.g. [plugins."x".y].
	Header string
	// First and Again are the 1-based lines of its two occurrences.
	First, Again int
}

// RepeatedTable finds the first [table] header (not [[array]]) whose text,
// from '[' to ']', appears earlier in src byte for byte. Every TOML decoder
// containerd has shipped refuses such a file (go-toml v1 in 1.x:
// "duplicated tables"; v2 in 2.x: "table ... already exists"). The test is
// on text on purpose: decoders disagree on other redefinitions (go-toml v1
// loads `a.b = 1` followed by `[a]`, and tells [x."k"] from [x.'k']), so only
// the case every one of them refuses is decided without asking containerd.
func RepeatedTable(src []byte) (Repeat, bool) {
	seen := map[string]int{}
	for _, s := range parse(src) {
		if s.kind != kHeader {
			continue
		}
		i := s.start + int(s.indent)
		_, _, end, ok := parseHeader(src, i)
		if !ok {
			continue
		}
		h := string(src[i:end])
		if first, ok := seen[h]; ok {
			return Repeat{Header: h, First: first, Again: int(s.line)}, true
		}
		seen[h] = int(s.line)
	}
	return Repeat{}, false
}
