package ctrconf

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"weak"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

// Overrides turns a tree into a candidate: each path gets new content, a nil
// value removes the file. A path the tree does not have adds a file, which
// containerd loads only if an import glob matches it or a file imports it.
type Overrides map[string][]byte

// Effective is what containerd itself reported for one staged tree.
type Effective struct {
	// OK is set when containerd loaded the tree.
	OK bool
	// Err is containerd's complaint when it refused the tree, with scratch
	// paths replaced by the live paths they stand for.
	Err string
	// Stderr is everything containerd logged (warnings about unknown keys
	// included), with live paths.
	Stderr string
	// Raw is the dump exactly as containerd printed it. It may hold
	// registry credentials: never display it, use Flat or Diff.
	Raw []byte
	// Values is the parsed dump; its `imports` lists the live paths that
	// were loaded, sorted.
	Values map[string]any
	// Files are the live paths containerd was given, in load order.
	Files []string

	once sync.Once
	raw  map[string]string
	// lower is raw's keys in lower case (lowerKeys), made once.
	lowerOnce sync.Once
	lower     map[string]string
}

// lowerFlat is lowerKeys of the flattened dump, computed once: the dump is
// shared by every task that reads it (effective).
func (e *Effective) lowerFlat() map[string]string {
	e.lowerOnce.Do(func() { e.lower = lowerKeys(e.flat()) })
	return e.lower
}

// flat is the dump flattened without redaction, computed once; a failed
// dump has no keys.
func (e *Effective) flat() map[string]string {
	if e == nil {
		return map[string]string{}
	}
	e.once.Do(func() {
		if e.OK && e.Values != nil {
			e.raw = flatten(e.Values)
		} else {
			e.raw = map[string]string{}
		}
	})
	return e.raw
}

// Flat is Flatten of the dump: every effective key with credentials redacted.
func (e *Effective) Flat() map[string]string {
	f := e.flat()
	out := make(map[string]string, len(f))
	for k, v := range f {
		out[k] = shown(k, v)
	}
	return out
}

// Get returns the canonical (unredacted) value of one Flatten key and
// whether it is effective, for checks such as "runtimes.nvidia is present".
func (e *Effective) Get(key string) (string, bool) {
	v, ok := e.flat()[key]
	return v, ok
}

// variant is one staged experiment on a tree.
type variant struct {
	over     Overrides
	exclude  map[string]bool
	defaults bool // an empty config of the tree's version: the built-in defaults
}

// Dump stages the tree with overrides applied and returns containerd's
// effective configuration for it.
func Dump(ctx context.Context, h transport.Reader, t *Tree, over Overrides) (*Effective, error) {
	effs, err := DumpMany(ctx, h, t, []Overrides{over})
	if err != nil {
		return nil, err
	}
	return effs[0], nil
}

// DumpMany stages one tree per candidate in a single Stage round trip and
// runs the node's containerd (t.Bin) on each. A nil Overrides is the tree as
// it is. Every file containerd would load is staged under a scratch name and
// every `imports` is rewritten to those names (globs expanded to what they
// match in the candidate), so nothing live is read by the dumps. A removed
// file that a glob matched is simply not there; a removed file that is
// imported by name is missing, and containerd fails on it as it would live.
func DumpMany(ctx context.Context, h transport.Reader, t *Tree, candidates []Overrides) ([]*Effective, error) {
	effs, _, err := DumpManyWith(ctx, h, t, candidates, nil)
	return effs, err
}

// DumpManyWith is DumpMany that also runs extra read-only commands (such as
// checks of the runtime binaries) in the same Stage round trip.
func DumpManyWith(ctx context.Context, h transport.Reader, t *Tree, candidates []Overrides, extra []transport.Cmd) ([]*Effective, []*transport.CmdResult, error) {
	vs := make([]variant, len(candidates))
	for i, o := range candidates {
		vs[i] = variant{over: o}
	}
	return dumpVariantsExtra(ctx, h, t, t.Bin, vs, extra)
}

var stagedNameRe = regexp.MustCompile(`nc-[0-9]{4}\.toml`)

func stagedName(i int) string { return fmt.Sprintf("nc-%04d.toml", i) }

// known is the tree's files by path.
func (t *Tree) known() map[string]*File {
	m := make(map[string]*File, len(t.Files))
	for i := range t.Files {
		m[t.Files[i].Path] = &t.Files[i]
	}
	return m
}

// dumpVariants stages every variant in its own directory and dumps them all
// in one Stage call, each variant a transport.StageUnit: a variant this run
// already dumped (same staged contents, same binary), in whatever request,
// is answered without running containerd again. Files are staged flat next
// to the staged main file and imported by relative name: containerd
// resolves a relative (non-glob) import against the importing file's
// directory in every version, so no absolute scratch path has to be known
// before the scratch dir exists.
func dumpVariants(ctx context.Context, h transport.Reader, t *Tree, bin string, vs []variant) ([]*Effective, error) {
	effs, _, err := dumpVariantsExtra(ctx, h, t, bin, vs, nil)
	return effs, err
}

// dumpVariantsExtra is dumpVariants that also runs extra commands in the
// same round trip and returns their results.
func dumpVariantsExtra(ctx context.Context, h transport.Reader, t *Tree, bin string, vs []variant, extra []transport.Cmd) ([]*Effective, []*transport.CmdResult, error) {
	if bin == "" {
		bin = t.Bin
	}
	if bin == "" {
		bin = DefaultBin
	}
	known := t.known()
	req := transport.StageRequest{Cmds: extra}
	names := make([]map[string]string, len(vs)) // staged name -> live path
	orders := make([][]string, len(vs))
	for i, v := range vs {
		var steps []step
		if v.defaults {
			c := []byte{}
			if t.Version != 0 {
				c = fmt.Appendf(nil, "version = %d\n", t.Version)
			}
			steps = []step{{path: t.Main, content: c}}
		} else {
			src := &source{tree: t, known: known, over: v.over, exclude: v.exclude, strict: true}
			var err error
			steps, _, _, err = src.load()
			if err != nil {
				return nil, nil, fmt.Errorf("%s: stage candidate %d: %w", h.Host(), i, err)
			}
		}
		idx := map[string]string{}
		names[i] = map[string]string{}
		for j, s := range steps {
			idx[s.path] = stagedName(j)
			names[i][stagedName(j)] = s.path
			orders[i] = append(orders[i], s.path)
		}
		// One unit per variant: its files and its command are all that
		// decides the dump, so an identical variant staged earlier in the
		// run (by another module, or while planning) answers it. A dump
		// lives for a few dozen milliseconds: without Go's collector
		// (GOGC=off, which changes nothing it prints) it costs the node
		// about a fifth less CPU.
		u := transport.StageUnit{Files: map[string]transport.StagedFile{}, Cmd: transport.Cmd{Script: fmt.Sprintf(
			`GOGC=off exec %s --config %s config dump`, transport.ShellQuote(bin), stagedName(0))}}
		for _, s := range steps {
			if s.missing && s.path == t.Main {
				// containerd ignores a main config that does not exist
				// and runs on its defaults; an empty file says the same.
				s.missing, s.content, s.imports = false, []byte{}, nil
			}
			if s.missing {
				continue
			}
			list := make([]string, len(s.imports))
			for k, p := range s.imports {
				list[k] = idx[p]
			}
			content, err := rewriteImports(s.content, list)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: stage %s: %w", h.Host(), s.path, err)
			}
			u.Files[idx[s.path]] = transport.StagedFile{Content: content, Mode: 0o600}
		}
		req.Units = append(req.Units, u)
	}
	res, err := h.Stage(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: dump %d containerd config variants: %w", h.Host(), len(vs), err)
	}
	if len(res) != len(vs)+len(extra) {
		return nil, nil, fmt.Errorf("%s: staged %d dumps, got %d results", h.Host(), len(vs), len(res))
	}
	out := make([]*Effective, len(vs))
	for i, r := range res[len(extra):] {
		out[i] = effective(r, names[i], orders[i])
	}
	return out, res[:len(extra)], nil
}

// parsed keeps each dump's Effective while its result lives: a staged
// unit's result is one *CmdResult for the whole run on a host (node.Host
// answers an identical unit from it), and every containerd task of a play
// reads the same live dump, so each was parsed and flattened once per task
// (a fifth of a drift run's controller CPU). Keyed weakly by the result, so
// a host's dumps go when its read cache does (a retired host), whatever the
// fleet size; and by the live paths the staged names stand for, which the
// result alone does not decide.
var parsed = struct {
	mu sync.Mutex
	m  map[parsedKey]*Effective
}{m: map[parsedKey]*Effective{}}

type parsedKey struct {
	r     weak.Pointer[transport.CmdResult]
	order string
}

// effective reads one dump's result, once per result and live paths. The
// Effective it returns is shared: callers only read it.
func effective(r *transport.CmdResult, names map[string]string, order []string) *Effective {
	k := parsedKey{weak.Make(r), strings.Join(order, "\x00")}
	parsed.mu.Lock()
	e, ok := parsed.m[k]
	parsed.mu.Unlock()
	if ok {
		return e
	}
	e = parseDump(r, names, order)
	parsed.mu.Lock()
	defer parsed.mu.Unlock()
	if first, ok := parsed.m[k]; ok {
		// Another task parsed it meanwhile: every reader shares one.
		return first
	}
	parsed.m[k] = e
	runtime.AddCleanup(r, func(k parsedKey) {
		parsed.mu.Lock()
		delete(parsed.m, k)
		parsed.mu.Unlock()
	}, k)
	return e
}

// parseDump reads one dump's result.
func parseDump(r *transport.CmdResult, names map[string]string, order []string) *Effective {
	live := func(s string) string {
		return stagedNameRe.ReplaceAllStringFunc(s, func(n string) string {
			if p, ok := names[n]; ok {
				return p
			}
			return n
		})
	}
	e := &Effective{Stderr: live(string(r.Stderr)), Files: order}
	if !r.OK() {
		e.Err = strings.TrimSpace(e.Stderr)
		if e.Err == "" {
			e.Err = fmt.Sprintf("containerd exited %d", r.ExitCode)
		}
		return e
	}
	e.Raw = r.Stdout
	if err := toml.Unmarshal(r.Stdout, &e.Values); err != nil {
		e.Err = fmt.Sprintf("cannot parse containerd's dump: %v", err)
		return e
	}
	if imps, ok := e.Values["imports"].([]any); ok {
		var paths []string
		for _, i := range imps {
			if s, ok := i.(string); ok {
				paths = append(paths, live(s))
			}
		}
		sort.Strings(paths)
		list := make([]any, len(paths))
		for i, p := range paths {
			list[i] = p
		}
		e.Values["imports"] = list
	}
	e.OK = true
	return e
}

// DumpEvidence records one staged dump in a plan: what tree it measured, the
// command, and whether containerd loaded it (its complaint if not).
func DumpEvidence(what string, t *Tree, e *Effective) module.Evidence {
	out := e.Err
	if e.OK {
		out = fmt.Sprintf("loads %d files", len(e.Files))
	}
	return module.Evidence{What: what, Command: t.Bin + " --config <staged " + t.Main + "> config dump", OK: e.OK, Output: out, Required: true}
}

// ErrLine is the first line of containerd's complaint about a tree it
// refused, for a one-line message.
func (e *Effective) ErrLine() string {
	s, _, _ := strings.Cut(strings.TrimSpace(e.Err), "\n")
	return s
}
