package ctrconf

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/transport"
)

// DefaultBin is the containerd binary used when a caller names none: the one
// on the node's PATH, because the node's own binary is the oracle.
const DefaultBin = "containerd"

// Tree is a containerd configuration as the daemon would load it: the main
// file and every file it imports, directly or through imported files, in the
// order containerd loads them.
type Tree struct {
	// Main is the path of the main config file on the node.
	Main string
	// Version is the main file's `version` (0 when it sets none).
	Version int
	// Bin is the containerd binary dumps run with.
	Bin string
	// BinVersion is the first line of `Bin --version` on the node, "" when
	// the binary did not answer.
	BinVersion string
	// Files is every file containerd loads, main first, then imports in
	// containerd's order (breadth first, each glob sorted, a path loaded
	// once). A file that an explicit import names but that does not exist
	// is listed with Missing set: containerd refuses to start on it.
	Files []File
	// Imports is every import containerd resolves, in order: absolute glob
	// patterns and absolute explicit paths.
	Imports []string
	// Globs is what each glob pattern matched on the node, sorted.
	Globs map[string][]string
	// Warnings are facts about the tree a reader should know, such as a
	// relative glob whose base depends on the daemon's working directory.
	Warnings []string
}

// File is one config file of a Tree.
type File struct {
	Path    string
	Content []byte
	// Missing is set for a file an import names that is not on the node,
	// and for any path containerd cannot read as a regular file.
	Missing bool
	// Unloadable says why containerd would not load the path as a config
	// file ("is a directory", "is a dangling symlink", ...), "" for a
	// regular file. Such a path is part of the tree (a glob matched it or
	// an import names it) and the daemon refuses the tree, but containerd
	// 2.x's `config dump` does not: it prints the config without the path
	// and without every file queued after it. A tree with one is never
	// measured as if it loaded.
	Unloadable string
	// Parses reports whether the file is valid TOML; ParseErr says why not
	// (a file with duplicated tables does not parse, and containerd
	// refuses it).
	Parses   bool
	ParseErr string
	// Version is the file's own `version` key, 0 when it sets none.
	Version int
	// ImportSpecs are the file's `imports` entries as written.
	ImportSpecs []string
	// Plugins are the plugin ids the file mentions, sorted, e.g.
	// io.containerd.grpc.v1.cri. For a file that does not parse they come
	// from its table headers.
	Plugins []string

	// mainVersion is the version plugin names were migrated with.
	mainVersion int
	// keys are the flattened keys the file writes with their raw
	// (unredacted) canonical values; nil when the file does not parse.
	keys map[string]string
}

// File returns the tree's file at path, or nil.
func (t *Tree) File(path string) *File {
	for i := range t.Files {
		if t.Files[i].Path == path {
			return &t.Files[i]
		}
	}
	return nil
}

// VersionCmd is the Query command that reads the binary's version: a Memo
// command, since starting containerd costs a node about as much as a config
// dump and its version changes only with the binary.
func VersionCmd(containerdBin string) transport.Cmd {
	return transport.Cmd{Argv: []string{containerdBin, "--version"}, Memo: true}
}

// PrefetchQuery is what Gather will read on a node laid out as containerd's
// packages and the GPU Operator lay it out (imports of conf.d/*.toml beside
// the main config), for a runner to read ahead in one round trip. Other
// layouts still work; they cost Gather its own round trips.
func PrefetchQuery(mainPath, containerdBin string) transport.Query {
	if containerdBin == "" {
		containerdBin = DefaultBin
	}
	mainPath = filepath.Clean(mainPath)
	g := filepath.Join(filepath.Dir(mainPath), "conf.d", "*.toml")
	q := transport.Query{
		Files: []string{mainPath},
		Cmds:  []transport.Cmd{VersionCmd(containerdBin)},
		Globs: []string{g},
	}
	if d := dotVariant(g); d != "" {
		q.Globs = append(q.Globs, d)
	}
	return q
}

// Gather reads the main config at mainPath, resolves its imports (globs
// expanded on the node) and reads every imported file. It costs one Query for
// the main file and one for its imports; only imported files that import
// further files cost another round each. containerdBin is the node's binary
// ("" for DefaultBin); its version decides how relative glob imports resolve.
func Gather(ctx context.Context, h transport.Reader, mainPath, containerdBin string) (*Tree, error) {
	if containerdBin == "" {
		containerdBin = DefaultBin
	}
	if !filepath.IsAbs(mainPath) {
		return nil, fmt.Errorf("containerd config path %q is not absolute", mainPath)
	}
	mainPath = filepath.Clean(mainPath)
	snap, err := h.Query(ctx, transport.Query{
		Files: []string{mainPath},
		Cmds:  []transport.Cmd{VersionCmd(containerdBin)},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", h.Host(), mainPath, err)
	}
	t := &Tree{Main: mainPath, Bin: containerdBin, Globs: map[string][]string{}}
	if len(snap.Cmds) > 0 && snap.Cmds[0].OK() {
		t.BinVersion = strings.TrimSpace(strings.SplitN(string(snap.Cmds[0].Stdout), "\n", 2)[0])
	}
	known := map[string]*File{}
	version := 0
	addFile := func(fi *transport.FileInfo, p string, globbed bool) {
		f := &File{Path: p}
		if fi == nil || !fi.Exists || !fi.Mode.IsRegular() {
			// containerd cannot read it either; 1.x's dump fails on it,
			// 2.x's silently stops loading there.
			f.Missing = true
			f.Unloadable = unloadable(fi, globbed)
		} else {
			f.Content = fi.Content
			f.analyze(version)
		}
		known[p] = f
	}
	addFile(snap.File(mainPath), mainPath, false)
	t.Version = known[mainPath].Version
	if t.Version != 0 {
		// Plugin names are migrated by the version the main file declares.
		version = t.Version
		known[mainPath].analyze(version)
	}

	src := &source{tree: t, known: known}
	for round := 0; ; round++ {
		steps, needPaths, needGlobs, err := src.load()
		if err != nil {
			return nil, fmt.Errorf("%s: resolve imports of %s: %w", h.Host(), mainPath, err)
		}
		if len(needPaths) == 0 && len(needGlobs) == 0 {
			for _, s := range steps {
				t.Files = append(t.Files, *known[s.path])
			}
			t.Imports = src.resolvedSpecs
			break
		}
		if round >= 32 {
			return nil, fmt.Errorf("%s: imports of %s nest deeper than 32 levels", h.Host(), mainPath)
		}
		q := transport.Query{Files: needPaths}
		for _, g := range needGlobs {
			q.Globs = append(q.Globs, g)
			if d := dotVariant(g); d != "" {
				q.Globs = append(q.Globs, d)
			}
		}
		snap, err := h.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("%s: read imports of %s: %w", h.Host(), mainPath, err)
		}
		for _, p := range needPaths {
			addFile(snap.File(p), p, false)
		}
		for _, g := range needGlobs {
			seen := map[string]bool{}
			var matches []string
			for _, pat := range []string{g, dotVariant(g)} {
				if pat == "" {
					continue
				}
				for _, m := range snap.Globs[pat] {
					m = filepath.Clean(m)
					if seen[m] {
						continue
					}
					seen[m] = true
					matches = append(matches, m)
					if _, ok := known[m]; !ok {
						addFile(snap.File(m), m, true)
					}
				}
			}
			sort.Strings(matches)
			t.Globs[g] = matches
		}
	}
	t.Warnings = append(t.Warnings, src.warnings...)
	return t, nil
}

// dotVariant returns the extra pattern a shell needs to match what Go's
// filepath.Glob (which containerd uses) also matches: names starting with a
// dot, which a shell wildcard at the start of a name skips. "" when the last
// element does not start with a wildcard.
func dotVariant(pattern string) string {
	base := filepath.Base(pattern)
	if base == "" || strings.IndexByte("*?[", base[0]) < 0 {
		return ""
	}
	return filepath.Join(filepath.Dir(pattern), "."+base)
}

// analyze parses the file and records what it says about itself. mainVersion
// decides whether short v1 plugin names are migrated.
func (f *File) analyze(mainVersion int) {
	if f.Missing {
		return
	}
	f.mainVersion = mainVersion
	var doc map[string]any
	err := toml.Unmarshal(f.Content, &doc)
	if err != nil {
		f.Parses = false
		f.ParseErr = err.Error()
		var derr *toml.DecodeError
		if errors.As(err, &derr) {
			row, col := derr.Position()
			f.ParseErr = fmt.Sprintf("(%d, %d): %s", row, col, derr.Error())
		}
		specs, serr := scanImports(f.Content)
		if serr != nil {
			// containerd cannot read this file either; the dump will say
			// so, and no imports are followed from it.
			f.ParseErr += "; " + serr.Error()
		}
		f.ImportSpecs = specs
		f.Version = scanVersion(f.Content)
		f.Plugins = scanPlugins(f.Content, mainVersion)
		f.keys = nil
		return
	}
	f.Parses, f.ParseErr = true, ""
	f.Version = 0
	if v, ok := doc["version"].(int64); ok {
		f.Version = int(v)
	}
	f.ImportSpecs = nil
	if imps, ok := doc["imports"].([]any); ok {
		for _, i := range imps {
			if s, ok := i.(string); ok {
				f.ImportSpecs = append(f.ImportSpecs, s)
			}
		}
	}
	f.Plugins = nil
	if pl, ok := doc["plugins"].(map[string]any); ok {
		migrated := map[string]any{}
		for id, v := range pl {
			id = migratePluginName(id, mainVersion)
			migrated[id] = v
			f.Plugins = append(f.Plugins, id)
		}
		doc["plugins"] = migrated
		sort.Strings(f.Plugins)
		f.Plugins = dedupSorted(f.Plugins)
	}
	delete(doc, "version")
	delete(doc, "imports")
	f.keys = flatten(doc)
}

func dedupSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// corePlugins are the short plugin names of config version 1 and the ids
// containerd migrates them to.
var corePlugins = map[string]string{
	"cri": "io.containerd.grpc.v1.cri", "cgroups": "io.containerd.monitor.v1.cgroups",
	"linux": "io.containerd.runtime.v1.linux", "scheduler": "io.containerd.gc.v1.scheduler",
	"bolt": "io.containerd.metadata.v1.bolt", "task": "io.containerd.runtime.v2.task",
	"opt": "io.containerd.internal.v1.opt", "restart": "io.containerd.internal.v1.restart",
	"tracing": "io.containerd.internal.v1.tracing", "otlp": "io.containerd.tracing.processor.v1.otlp",
	"aufs": "io.containerd.snapshotter.v1.aufs", "btrfs": "io.containerd.snapshotter.v1.btrfs",
	"devmapper": "io.containerd.snapshotter.v1.devmapper", "native": "io.containerd.snapshotter.v1.native",
	"overlayfs": "io.containerd.snapshotter.v1.overlayfs", "zfs": "io.containerd.snapshotter.v1.zfs",
}

// migratePluginName applies containerd's v1 -> v2 plugin renaming, which
// happens only when the loaded config is older than version 2.
func migratePluginName(id string, version int) string {
	if version >= 2 || strings.Contains(id, ".") {
		return id
	}
	if full, ok := corePlugins[id]; ok {
		return full
	}
	if strings.HasSuffix(id, "-service") {
		return "io.containerd.service.v1." + id
	}
	if id == "windows" || id == "windows-lcow" {
		return "io.containerd.snapshotter.v1." + id
	}
	return "io.containerd.grpc.v1." + id
}

var (
	importsLineRe = regexp.MustCompile(`^\s*(imports|"imports"|'imports')\s*=`)
	versionLineRe = regexp.MustCompile(`^\s*version\s*=\s*([0-9]+)\s*(#.*)?$`)
	pluginHdrRe   = regexp.MustCompile(`^\s*\[\[?\s*plugins\s*\.\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))`)
)

// topLevelLines calls fn for every line before the first table header with
// the bracket depth at its start, so multi-line arrays are not mistaken for
// headers. It works on files that do not parse, which is the point: a file
// with duplicated tables still has readable imports.
func topLevelLines(content []byte, fn func(i int, line string, depth int) bool) {
	lines := strings.Split(string(content), "\n")
	depth := 0
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if depth == 0 && strings.HasPrefix(trimmed, "[") {
			return
		}
		if !fn(i, line, depth) {
			return
		}
		depth += bracketDelta(line)
		if depth < 0 {
			depth = 0
		}
	}
}

// bracketDelta counts [ minus ] outside strings and comments.
func bracketDelta(line string) int {
	d := 0
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return d
		case c == '[':
			d++
		case c == ']':
			d--
		}
	}
	return d
}

// importsSpan finds the top-level `imports = [...]` assignment: its first
// line and the line after its last. ok is false when there is none.
func importsSpan(content []byte) (start, end int, ok bool) {
	start = -1
	topLevelLines(content, func(i int, line string, depth int) bool {
		if start < 0 {
			if depth == 0 && importsLineRe.MatchString(line) {
				start = i
				if bracketDelta(line) <= 0 {
					end = i + 1
					return false
				}
			}
			return true
		}
		if depth+bracketDelta(line) <= 0 {
			end = i + 1
			return false
		}
		return true
	})
	if start < 0 || end <= start {
		return 0, 0, false
	}
	return start, end, true
}

// scanImports reads the imports of a file that may not parse as a whole.
func scanImports(content []byte) ([]string, error) {
	start, end, ok := importsSpan(content)
	if !ok {
		return nil, nil
	}
	lines := strings.Split(string(content), "\n")
	var v struct {
		Imports []string `toml:"imports"`
	}
	// A CRLF file leaves a '\r' at the end of every line split at '\n';
	// a bare '\r' is not TOML, so the fragment keeps whole line endings.
	frag := strings.Join(lines[start:end], "\n")
	if strings.HasSuffix(frag, "\r") {
		frag += "\n"
	}
	if err := toml.Unmarshal([]byte(frag), &v); err != nil {
		return nil, fmt.Errorf("parse imports: %w", err)
	}
	return v.Imports, nil
}

func scanVersion(content []byte) int {
	v := 0
	topLevelLines(content, func(_ int, line string, depth int) bool {
		if m := versionLineRe.FindStringSubmatch(line); depth == 0 && m != nil {
			n, err := strconv.Atoi(m[1])
			if err == nil {
				v = n
			}
			return false
		}
		return true
	})
	return v
}

func scanPlugins(content []byte, mainVersion int) []string {
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(string(content), "\n") {
		m := pluginHdrRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		id := m[1] + m[2] + m[3]
		id = migratePluginName(id, mainVersion)
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// rewriteImports replaces the file's top-level imports with list, keeping
// every other byte and the line count, so containerd's (row, col) in an
// error still points at the live file's line.
func rewriteImports(content []byte, list []string) ([]byte, error) {
	var b strings.Builder
	b.WriteString("imports = [")
	for i, p := range list {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(p))
	}
	b.WriteString("]")
	start, end, ok := importsSpan(content)
	if !ok {
		if len(list) == 0 {
			return content, nil
		}
		return nil, fmt.Errorf("no top-level imports assignment to rewrite")
	}
	lines := strings.Split(string(content), "\n")
	repl := []string{b.String()}
	for i := start + 1; i < end; i++ {
		repl = append(repl, "")
	}
	out := append(append(append([]string{}, lines[:start]...), repl...), lines[end:]...)
	return []byte(strings.Join(out, "\n")), nil
}

// hasGlob reports whether containerd treats an import as a glob: only '*'
// makes it one.
func hasGlob(p string) bool { return strings.Contains(p, "*") }

// binMajor is the containerd major version from `containerd --version`, 0
// when unknown.
func binMajor(v string) int {
	for _, f := range strings.Fields(v) {
		f = strings.TrimPrefix(f, "v")
		if f == "" || f[0] < '0' || f[0] > '9' || !strings.Contains(f, ".") {
			continue
		}
		n, err := strconv.Atoi(f[:strings.IndexByte(f, '.')])
		if err == nil {
			return n
		}
	}
	return 0
}

// Major is the major version of the tree's containerd binary, 1 when the
// binary did not say: the conservative answer for the merge rules (1.x
// replaces a plugin's whole table).
func (t *Tree) Major() int { return MajorOf(t.BinVersion) }

// MajorOf is the major version in `containerd --version` output, 1 when it
// does not say (see Tree.Major).
func MajorOf(binVersion string) int {
	if m := binMajor(binVersion); m > 0 {
		return m
	}
	return 1
}
