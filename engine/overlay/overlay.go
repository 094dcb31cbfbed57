// Package overlay lays the planned writes of a check-mode run over the live
// node, so each task plans against the files as the earlier tasks would have
// left them. Without it, check mode lies in both directions: a task whose
// input an earlier task repairs fails in check mode, and a task that an
// earlier task makes unnecessary reports a change apply never makes.
package overlay

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

// Overlay is a transport.Reader over a live Reader plus planned file states.
// It is still read-only: it has no write methods, and Record only changes
// what later Queries see.
type Overlay struct {
	r     transport.Reader
	mu    sync.Mutex
	files map[string]*transport.FileInfo
}

// New wraps r.
func New(r transport.Reader) *Overlay {
	return &Overlay{r: r, files: map[string]*transport.FileInfo{}}
}

// Host is the node's name.
func (o *Overlay) Host() string { return o.r.Host() }

// Record makes later Queries see the files as changes would leave them.
func (o *Overlay) Record(changes []module.FileChange) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range changes {
		switch c.Action {
		case module.Create, module.Update:
			o.files[c.Path] = &transport.FileInfo{Path: c.Path, Exists: true, Mode: c.Mode, Owner: c.Owner, Group: c.Group, Content: c.After}
		case module.Delete:
			o.files[c.Path] = &transport.FileInfo{Path: c.Path}
		case module.Move:
			o.files[c.From] = &transport.FileInfo{Path: c.From}
			o.files[c.Path] = &transport.FileInfo{Path: c.Path, Exists: true, Mode: c.Mode, Content: c.After}
		}
	}
}

// Stage passes through: staged files are given by content, which the module
// took from an overlaid Query.
func (o *Overlay) Stage(ctx context.Context, r transport.StageRequest) ([]*transport.CmdResult, error) {
	return o.r.Stage(ctx, r)
}

// Query asks the live node, then lays the planned states over the answer.
func (o *Overlay) Query(ctx context.Context, q transport.Query) (*transport.Snapshot, error) {
	o.mu.Lock()
	planned := make(map[string]*transport.FileInfo, len(o.files))
	for k, v := range o.files {
		planned[k] = v
	}
	o.mu.Unlock()
	// Files the plan creates under a glob must be read from the plan, and
	// files it removes must disappear from the glob's matches.
	snap, err := o.r.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(planned) == 0 {
		return snap, nil
	}
	for _, p := range q.Files {
		if f, ok := planned[p]; ok {
			snap.Files[p] = f.Written(snap.Files[p])
		}
	}
	// A read-only command that says what it reads (stat's and file's
	// probes of a path's kind and mode) answers for the live node: the
	// planned state of those paths comes with it in Files, as the plan
	// has it (a zero mode or owner: as the live file's), so the module
	// can see what the earlier tasks will have done. A Reads entry ending
	// in "/" is a directory the command lists (find's probe): every planned
	// file under it comes along.
	for _, c := range q.Cmds {
		for _, r := range c.Reads {
			for p, f := range planned {
				if p != r && (!strings.HasSuffix(r, "/") || !strings.HasPrefix(p, r)) {
					continue
				}
				if _, asked := snap.Files[p]; !asked {
					if snap.Files == nil {
						snap.Files = map[string]*transport.FileInfo{}
					}
					cp := *f
					snap.Files[p] = &cp
				}
			}
		}
	}
	for _, g := range q.Globs {
		set := map[string]bool{}
		for _, m := range snap.Globs[g] {
			set[m] = true
		}
		for p, f := range planned {
			ok, err := transport.ShellMatch(g, p)
			if err != nil {
				return nil, fmt.Errorf("glob %q: %w", g, err)
			}
			if !ok {
				continue
			}
			set[p] = f.Exists
			if f.Exists {
				snap.Files[p] = f.Written(snap.Files[p])
			}
		}
		var matches []string
		for p, keep := range set {
			if keep {
				matches = append(matches, p)
			}
		}
		sort.Strings(matches)
		if snap.Globs == nil {
			snap.Globs = map[string][]string{}
		}
		snap.Globs[g] = matches
	}
	return snap, nil
}
