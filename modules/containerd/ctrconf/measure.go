package ctrconf

import (
	"context"
	"fmt"
	"io/fs"
	"sort"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/transport"
)

// unloadable says why a path of the tree is not a file containerd loads.
// globbed is set for a path a glob matched: the node listed the name, so
// when it does not exist now it is a symlink whose target is gone.
func unloadable(fi *transport.FileInfo, globbed bool) string {
	switch {
	case fi == nil || !fi.Exists:
		if globbed {
			return "is a dangling symlink"
		}
		return "does not exist"
	case fi.IsDir:
		return "is a directory"
	case fi.Mode&fs.ModeNamedPipe != 0:
		return "is a named pipe"
	case fi.Mode&fs.ModeSocket != 0:
		return "is a socket"
	case fi.Mode&fs.ModeDevice != 0:
		return "is a device"
	}
	return "is not a regular file"
}

// Undecidable is a path of the tree that containerd refuses, so that no
// dump of the tree says what the daemon would run.
type Undecidable struct {
	Path string `json:"path"`
	// Why is containerd's reason in words: "is a directory", "does not
	// parse: ...".
	Why string `json:"why"`
	// Parse is set for a regular file that is not valid TOML: a later
	// task may repair it (containerd_nvidia repairs duplicated nvidia
	// tables); a directory or a dangling symlink needs the operator.
	Parse bool `json:"parse,omitempty"`
}

// Undecidable lists every path of the tree containerd would refuse: a path
// an import names or a glob matches that it cannot read as a regular file,
// and a file that is not valid TOML. A main config that does not exist is
// not one: containerd runs on its defaults then.
func (t *Tree) Undecidable() []Undecidable {
	var out []Undecidable
	for _, f := range t.Files {
		switch {
		case f.Path == t.Main && f.Unloadable == "does not exist":
		case f.Unloadable != "":
			out = append(out, Undecidable{Path: f.Path, Why: f.Unloadable})
		case !f.Missing && !f.Parses:
			out = append(out, Undecidable{Path: f.Path, Why: "does not parse: " + f.ParseErr, Parse: true})
		}
	}
	return out
}

// Writes lists the flattened keys the file writes, sorted; nil when it does
// not parse.
func (f *File) Writes() []string {
	return sortedKeysOf(f.keys)
}

// Written is the canonical (unredacted) text of the value the file writes at
// key, for comparing with Effective.Get.
func (f *File) Written(key string) (string, bool) {
	v, ok := f.keys[key]
	return v, ok
}

// Value returns the typed value the file writes at a Flatten key, with
// plugin names migrated as the tree's main version migrates them, so that it
// can be written into another file of the same tree.
func (f *File) Value(key string) (any, bool) {
	var doc map[string]any
	if err := toml.Unmarshal(f.Content, &doc); err != nil {
		return nil, false
	}
	if pl, ok := doc["plugins"].(map[string]any); ok {
		migrated := map[string]any{}
		for id, v := range pl {
			migrated[migratePluginName(id, f.mainVersion)] = v
		}
		doc["plugins"] = migrated
	}
	var cur any = doc
	for _, s := range SplitKey(key) {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[s]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// SplitKey splits a Flatten key into its raw segments (JoinKey's inverse).
func SplitKey(key string) []string { return splitKey(key) }

// PluginOf is the plugin id a Flatten key belongs to, "" for a top-level key.
func PluginOf(key string) string { return pluginOf(key) }

// Analysis is the measurement of a tree that decisions read, together with
// the dumps it was read from.
type Analysis struct {
	*Explanation
	// Base is the dump of the whole tree.
	Base *Effective
	// Without is, per imported file (t.Files[1:]), the dump of the tree
	// without that file and its import line; nil when Base did not load,
	// and nil for a file that was not ablated (see Analyze).
	Without []*Effective
}

// Analyze measures a tree for a decision, staging only what the decision
// needs; each dump is answered from the run's earlier dumps of identical
// variants where it can. It dumps the whole tree. When every value every
// file writes is in effect there, that is the answer: no Lost keys, no
// Shadows, no Keys. Otherwise it dumps the defaults and the load-order
// prefixes (Keys and Lost as Explain reads them), then the tree without
// each file that took a written value out of effect (a Lost key's Winner
// that dropped or reset it): Shadows come from those ablations only.
// ExplainTree ablates every file.
func Analyze(ctx context.Context, h transport.Reader, t *Tree) (*Analysis, error) {
	x, base, without, err := explainTree(ctx, h, t, true)
	if err != nil {
		return nil, err
	}
	return &Analysis{Explanation: x, Base: base, Without: without}, nil
}

// CandidateTree is the tree as it would be on the node with over applied:
// files replaced, added (loaded when a glob matches them or a file imports
// them) or removed (nil), in containerd's load order, each analysed. It
// reads nothing from the node, so every file the candidate loads must have
// been gathered or be in over. Explaining a candidate tree measures the
// candidate before anything live changes.
func CandidateTree(t *Tree, over Overrides) (*Tree, error) {
	src := &source{tree: t, known: t.known(), over: over, strict: true}
	steps, _, _, err := src.load()
	if err != nil {
		return nil, fmt.Errorf("candidate of %s: %w", t.Main, err)
	}
	c := &Tree{Main: t.Main, Version: t.Version, Bin: t.Bin, BinVersion: t.BinVersion, Globs: map[string][]string{},
		Imports: src.resolvedSpecs, Warnings: t.Warnings}
	for _, st := range steps {
		if _, replaced := over[st.path]; !replaced {
			c.Files = append(c.Files, *t.File(st.path))
			continue
		}
		f := File{Path: st.path, Content: st.content, Missing: st.missing}
		if st.missing {
			f.Unloadable = "does not exist"
		} else {
			f.analyze(t.Version)
		}
		c.Files = append(c.Files, f)
	}
	for pat := range t.Globs {
		m, _ := src.glob(pat)
		c.Globs[pat] = m
	}
	return c, nil
}

// Shadowed reports whether a lost key is out of effect because another file
// hid it (its plugin table replaced, or reset to the default), as opposed
// to overridden by a file that sets it, ignored, or unknown to containerd.
func (l LostKey) Shadowed() bool { return l.Cause == CauseDropped || l.Cause == CauseReset }

// Causes of a LostKey.
const (
	// CauseOverridden: a later file sets the key to another value itself.
	CauseOverridden = "overridden"
	// CauseReset: a later file's table replaced the plugin's, and the
	// key is back at its built-in default.
	CauseReset = "reset"
	// CauseDropped: the key is gone from the effective config since a
	// later file replaced the table that held it.
	CauseDropped = "dropped"
	// CauseDefault: containerd runs the default although no file reset it.
	CauseDefault = "default"
	// CauseUnknown: containerd does not know the key at all.
	CauseUnknown = "unknown"
)

// sortLost orders lost keys by file in load order, then key.
func sortLost(t *Tree, ls []LostKey) {
	pos := map[string]int{}
	for i, f := range t.Files {
		pos[f.Path] = i
	}
	sort.SliceStable(ls, func(i, j int) bool {
		if pos[ls[i].File] != pos[ls[j].File] {
			return pos[ls[i].File] < pos[ls[j].File]
		}
		return ls[i].Key < ls[j].Key
	})
}
