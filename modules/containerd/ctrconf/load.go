package ctrconf

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/pelletier/go-toml/v2"
)

// source is one variant of a tree: the gathered files, a candidate's
// overrides and the files left out of an experiment. load walks it the way
// containerd's LoadConfig does.
type source struct {
	tree  *Tree
	known map[string]*File
	// over replaces files; a nil value means the file is gone from the
	// node, exactly as it would be live: a glob no longer matches it and an
	// explicit import of it fails.
	over Overrides
	// exclude leaves files out together with every import naming them:
	// the experiment "as if this file and its import line did not exist".
	exclude map[string]bool
	// strict makes unknown paths an error instead of something to read.
	strict bool

	resolvedSpecs []string
	warnings      []string
}

// step is one file in load order.
type step struct {
	path    string
	missing bool
	content []byte
	imports []string // resolved paths, in order, as containerd would queue them
}

// content returns what the variant holds at path: known is false when the
// path was never read from the node.
func (s *source) content(p string) (content []byte, specs []string, missing, known bool) {
	if c, ok := s.over[p]; ok {
		if c == nil {
			return nil, nil, true, true
		}
		return c, importSpecsOf(c), false, true
	}
	f, ok := s.known[p]
	if !ok {
		return nil, nil, false, false
	}
	return f.Content, f.ImportSpecs, f.Missing, true
}

// importSpecsOf reads a candidate's imports, leniently when it does not parse.
func importSpecsOf(content []byte) []string {
	var v struct {
		Imports []string `toml:"imports"`
	}
	if err := toml.Unmarshal(content, &v); err == nil {
		return v.Imports
	}
	specs, err := scanImports(content)
	if err != nil {
		return nil
	}
	return specs
}

// glob is what pattern matches in this variant: the node's matches without
// removed or excluded files, plus candidate files the pattern matches.
func (s *source) glob(pattern string) ([]string, bool) {
	node, ok := s.tree.Globs[pattern]
	if !ok {
		return nil, false
	}
	set := map[string]bool{}
	for _, m := range node {
		if c, over := s.over[m]; over && c == nil {
			continue
		}
		set[m] = true
	}
	for p, c := range s.over {
		if c == nil {
			continue
		}
		if ok, err := filepath.Match(pattern, p); err == nil && ok {
			set[p] = true
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		if !s.exclude[m] {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out, true
}

// globBase is the directory a relative glob import is resolved against.
// containerd before 2.0 hands a relative glob to filepath.Glob as it is, so
// it resolves against the daemon's working directory ("/" under systemd);
// 2.0 resolves it against the importing file's directory (containerd PR
// #9746). Relative explicit paths resolve against the importing file's
// directory in every version.
func (s *source) globBase(parent string) string {
	if binMajor(s.tree.BinVersion) >= 2 {
		return filepath.Dir(parent)
	}
	return "/"
}

// load walks the variant breadth first from the main file, as containerd
// does: a file's imports are queued after everything already queued, and a
// path is loaded once. needPaths and needGlobs are what must still be read
// from the node (never set when strict; that is an error instead).
func (s *source) load() (steps []step, needPaths, needGlobs []string, err error) {
	queue := []string{s.tree.Main}
	loaded := map[string]bool{}
	needP, needG := map[string]bool{}, map[string]bool{}
	warned := map[string]bool{}
	s.resolvedSpecs = nil
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if loaded[p] {
			continue
		}
		loaded[p] = true
		content, specs, missing, known := s.content(p)
		if !known {
			if s.strict {
				return nil, nil, nil, fmt.Errorf("%s is imported by the candidate but was not gathered from the node", p)
			}
			needP[p] = true
			continue
		}
		st := step{path: p, missing: missing, content: content}
		for _, spec := range specs {
			if hasGlob(spec) {
				pat := filepath.Clean(spec)
				if !filepath.IsAbs(pat) {
					base := s.globBase(p)
					if !warned[spec] {
						warned[spec] = true
						s.warnings = append(s.warnings, fmt.Sprintf("%s imports the relative glob %q, resolved against %s", p, spec, base))
					}
					pat = filepath.Join(base, pat)
				}
				s.resolvedSpecs = append(s.resolvedSpecs, pat)
				matches, ok := s.glob(pat)
				if !ok {
					if s.strict {
						return nil, nil, nil, fmt.Errorf("%s imports %q, a pattern that was not expanded on the node", p, spec)
					}
					needG[pat] = true
					continue
				}
				st.imports = append(st.imports, matches...)
				queue = append(queue, matches...)
				continue
			}
			ip := filepath.Clean(spec)
			if !filepath.IsAbs(ip) {
				ip = filepath.Join(filepath.Dir(p), ip)
			}
			s.resolvedSpecs = append(s.resolvedSpecs, ip)
			if s.exclude[ip] {
				continue
			}
			st.imports = append(st.imports, ip)
			queue = append(queue, ip)
		}
		steps = append(steps, st)
	}
	return steps, sortedKeys(needP), sortedKeys(needG), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
