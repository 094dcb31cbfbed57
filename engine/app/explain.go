package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"nodeconverge/engine/fanout"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/redact"
	"nodeconverge/engine/report"
	"nodeconverge/engine/safetext"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/sshconn"
	"nodeconverge/modules/containerd/ctrconf"
)

// ExplainOptions are the flags of `nodeconverge explain`.
type ExplainOptions struct {
	Fleet
	Config     string
	Containerd string
	JSON       bool
	All        bool
	// Playbook, when set, adds each value its tasks declare (the tasks of
	// modules that are a ctrconf.Declarer): in effect or not, and which
	// file decides it.
	Playbook string
	// Prove starts (and removes) a pod sandbox through every runtime;
	// without it explain only asks the running daemon what it loaded.
	Prove  bool
	Stdout io.Writer
}

// HostExplanation is one host's answer, or why there is none.
type HostExplanation struct {
	Host        string               `json:"host"`
	Error       string               `json:"error,omitempty"`
	Explanation *ctrconf.Explanation `json:"explanation,omitempty"`
	// Declared are the playbook's declared values on this host (with
	// --playbook).
	Declared []ctrconf.DeclaredValue `json:"declared,omitempty"`
	// Runtimes are the running daemon's view of each runtime (its CRI
	// status) and, with --prove, whether a pod sandbox started through it.
	Runtimes []module.Proof `json:"runtimes,omitempty"`
	// ProofError says why the daemon could not be asked or a runtime did
	// not prove.
	ProofError string `json:"proof_error,omitempty"`
}

// Explain measures, per host, which file owns what in containerd's
// effective config. It changes nothing: it only ever holds a Reader.
func Explain(ctx context.Context, o ExplainOptions) (int, error) {
	redact.Add(o.Redact...)
	if err := o.checkConnection(); err != nil {
		return report.ExitFailed, err
	}
	inv, err := o.LoadInventory(ctx)
	if err != nil {
		return report.ExitFailed, err
	}
	maskSecretVars(inv, nil)
	var hosts []*inventory.Host
	if o.Limit != "" {
		hosts, err = inv.SelectLimit(o.Limit)
	} else {
		hosts, err = inv.Select("all")
	}
	if err != nil {
		return report.ExitFailed, fmt.Errorf("--limit: %w", err)
	}
	declared, err := declaredSettings(inv, o.Playbook)
	if err != nil {
		return report.ExitFailed, err
	}
	if o.Forks <= 0 {
		o.Forks = 20
	}
	dial := o.Dialer()
	out := make([]HostExplanation, len(hosts))
	fanout.Each(o.Forks, hosts, func(i int, h *inventory.Host) {
		out[i] = explainHost(ctx, dial, h, o)
		if out[i].Explanation != nil {
			for _, d := range declared[h.Name] {
				out[i].Declared = append(out[i].Declared, d.Place(out[i].Explanation)...)
			}
		}
	})
	code := report.ExitOK
	for _, e := range out {
		// Without --prove a daemon that cannot be asked is reported, not a
		// failure: explain reads files first of all.
		if e.Error != "" || o.Prove && e.ProofError != "" {
			code = report.ExitFailed
		}
	}
	if o.JSON {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return report.ExitFailed, fmt.Errorf("encode: %w", err)
		}
		_, err = fmt.Fprintf(o.Stdout, "%s\n", redact.JSON(b))
		return code, err
	}
	for _, e := range out {
		// Secret-named inventory values are masked in what is printed.
		var b strings.Builder
		writeExplanation(&b, e, o.All)
		// The node's text (file names, error text, the daemon's words)
		// shows control characters as escapes.
		if _, err := io.WriteString(o.Stdout, safetext.Block(redact.Values(b.String()))); err != nil {
			return code, fmt.Errorf("write: %w", err)
		}
	}
	return code, nil
}

func explainHost(ctx context.Context, dial func(context.Context, *inventory.Host, bool) (transport.Conn, error), h *inventory.Host, o ExplainOptions) HostExplanation {
	c, err := dial(ctx, h, h.Conn.Become)
	if err != nil {
		return HostExplanation{Host: h.Name, Error: err.Error()}
	}
	defer func() {
		if err := c.Close(); err != nil && !sshconn.IsUnreachable(err) {
			fmt.Fprintf(o.Stdout, "close %s: %s\n", safetext.Name(h.Name), safetext.Line(err.Error()))
		}
	}()
	nh := node.NewHost(c, node.HostOptions{NoMemoWrites: true})
	r := transport.ReadOnly(nh)
	ex, err := ctrconf.Explain(ctx, r, o.Config, o.Containerd)
	if err != nil {
		return HostExplanation{Host: h.Name, Error: err.Error()}
	}
	he := HostExplanation{Host: h.Name, Explanation: ex}
	he.Runtimes, he.ProofError = explainRuntimes(ctx, transport.ProveOnly(nh), o)
	return he
}

// explainRuntimes asks every registered module that can Prove
// (containerd_restart) with its default arguments (the node's own
// containerd, config and socket) about every runtime the daemon loaded: the
// daemon's view, and with --prove a sandbox through each. It writes no
// file.
func explainRuntimes(ctx context.Context, p transport.Prover, o ExplainOptions) ([]module.Proof, string) {
	var out []module.Proof
	var errs []string
	for _, m := range module.All() {
		if m.Prove == nil {
			continue
		}
		args := m.NewArgs()
		proofs, err := m.Prove(ctx, p, args, module.ProveOptions{StatusOnly: !o.Prove, Loaded: true})
		out = append(out, proofs...)
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	return out, strings.Join(errs, "; ")
}

func writeExplanation(w io.Writer, he HostExplanation, all bool) {
	fmt.Fprintf(w, "== %s\n", safetext.Name(he.Host))
	if he.Error != "" {
		fmt.Fprintf(w, "  error: %s\n\n", safetext.Indent(he.Error, "    "))
		return
	}
	e := he.Explanation
	fmt.Fprintf(w, "  containerd: %s\n  config version %d; files containerd loads, in order:\n", e.BinVersion, e.Version)
	for i, f := range e.Files {
		fmt.Fprintf(w, "    %d. %s\n", i+1, safetext.Line(f))
	}
	for _, m := range e.Missing {
		fmt.Fprintf(w, "    MISSING (imported by name; containerd refuses to start): %s\n", m)
	}
	for _, u := range e.Unparseable {
		fmt.Fprintf(w, "    DOES NOT PARSE: %s: %s\n", u.File, u.Err)
	}
	for _, u := range e.Unloadable {
		fmt.Fprintf(w, "    CANNOT BE LOADED: %s %s (containerd refuses to start; 2.x's config dump silently stops there)\n", u.File, u.Err)
	}
	if !e.OK {
		fmt.Fprintf(w, "  the tree does not load: %s\n", e.Err)
	}
	if len(e.Owners) > 0 {
		fmt.Fprintf(w, "  plugin owners (containerd 1.x: the last file that mentions a plugin replaces all of it):\n")
		plugins := make([]string, 0, len(e.Owners))
		for p := range e.Owners {
			plugins = append(plugins, p)
		}
		sort.Strings(plugins)
		for _, p := range plugins {
			fmt.Fprintf(w, "    %-40s %s\n", p, e.Owners[p])
		}
	}
	for _, s := range e.Shadows {
		fmt.Fprintf(w, "  SHADOWING: %s hides %d value(s) that earlier files set:\n", s.File, len(s.Restored))
		zero := 0
		for _, c := range s.Restored {
			if !all && c.ZeroAfter() {
				// A hidden table brings every field at its zero value;
				// the lines that matter are the others.
				zero++
				continue
			}
			fmt.Fprintf(w, "    %s: %s without it, %s with it\n", c.Key, orAbsent(c.After), orAbsent(c.Before))
		}
		if zero > 0 {
			fmt.Fprintf(w, "    (and %d more at their zero value; --all lists them)\n", zero)
		}
	}
	if len(e.Lost) > 0 {
		fmt.Fprintf(w, "  written but NOT in effect:\n")
		writeLost(w, e.Lost)
	}
	fmt.Fprintf(w, "  effective keys written by a file:\n")
	defaults := 0
	for _, k := range e.Keys {
		if k.File == "" {
			defaults++
			if !all {
				continue
			}
		}
		fmt.Fprintf(w, "    %s = %s  <- %s\n", k.Key, k.Value, origin(k.File, k.ResetBy))
	}
	if !all {
		fmt.Fprintf(w, "  (%d more keys are built-in defaults; --all lists them)\n", defaults)
	}
	for _, warn := range e.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
	writeRuntimes(w, he, all)
	if len(he.Declared) > 0 {
		fmt.Fprintf(w, "  declared values (playbook):\n")
	}
	for _, d := range he.Declared {
		if d.InEffect {
			fmt.Fprintf(w, "    %s = %s: in effect  <- %s\n", d.Key, d.Declared, origin(d.DecidedBy, d.ResetBy))
		} else {
			fmt.Fprintf(w, "    %s = %s: NOT in effect, the node loads %s  <- %s\n", d.Key, d.Declared, d.Effective, origin(d.DecidedBy, d.ResetBy))
		}
	}
	fmt.Fprintln(w)
}

// writeRuntimes prints each runtime as the running daemon reports it,
// next to its effective config (the keys the dump gives it), and its proof.
func writeRuntimes(w io.Writer, he HostExplanation, all bool) {
	if len(he.Runtimes) == 0 && he.ProofError == "" {
		return
	}
	fmt.Fprintf(w, "  runtimes as the running daemon loaded them (its CRI status), and their proof by pod:\n")
	for _, p := range he.Runtimes {
		if p.Kind != "runtime" {
			fmt.Fprintf(w, "    %s\n", sanitizeLine(report.ProofLine(p)))
			continue
		}
		fmt.Fprintf(w, "    %s:", p.Name)
		if p.Loaded {
			fmt.Fprintf(w, " loaded by the daemon, runtime_type %s", p.RuntimeType)
			keys := make([]string, 0, len(p.Options))
			for k := range p.Options {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, ", %s=%s", k, p.Options[k])
			}
		} else {
			fmt.Fprintf(w, " NOT loaded by the daemon")
		}
		fmt.Fprintln(w)
		for _, k := range he.Explanation.Keys {
			if runtimeKey(k.Key, p.Name) && (all || k.File != "" && !(module.EffectiveChange{After: k.Value}).ZeroAfter()) {
				fmt.Fprintf(w, "      effective %s = %s  <- %s\n", k.Key, k.Value, origin(k.File, k.ResetBy))
			}
		}
		switch p.Status {
		case module.ProofProved:
			fmt.Fprintf(w, "      sandbox: started through it, READY, removed (%s)\n", p.Duration.Round(10*time.Millisecond))
		case module.ProofSkipped:
			fmt.Fprintf(w, "      sandbox: not started (--prove starts and removes one)\n")
		default:
			fmt.Fprintf(w, "      sandbox: %s: %s\n", strings.ToUpper(string(p.Status)), sanitizeLine(p.Reason))
		}
	}
	if he.ProofError != "" && len(he.Runtimes) == 0 {
		fmt.Fprintf(w, "    %s\n", sanitizeLine(he.ProofError))
	}
}

// runtimeKey says whether an effective key belongs to runtime name.
func runtimeKey(key, name string) bool {
	return strings.Contains(key, ".runtimes."+name+".") || strings.Contains(key, ".runtimes."+strconv.Quote(name)+".") ||
		strings.Contains(key, ".runtimes.'"+name+"'.")
}

// sanitizeLine keeps daemon text on its line, its control characters
// shown as escapes.
func sanitizeLine(s string) string { return safetext.Line(s) }

// declaredSettings reads what every task of a playbook whose module is a
// ctrconf.Declarer declares, per host its play targets. Values are taken
// as written: a templated value is refused here (apply --check renders it).
func declaredSettings(inv *inventory.Inventory, path string) (map[string][]ctrconf.Declaration, error) {
	out := map[string][]ctrconf.Declaration{}
	if path == "" {
		return out, nil
	}
	pb, err := playbook.Load(path)
	if err != nil {
		return nil, err
	}
	for _, play := range pb {
		hosts, err := inv.Select(play.Hosts)
		if err != nil {
			return nil, fmt.Errorf("%s: play %q: hosts: %w", path, play.Name, err)
		}
		for _, t := range play.Tasks {
			m, ok := module.Lookup(t.Module)
			if !ok {
				continue
			}
			// A domain capability of containerd's modules, not the
			// engine's (module/registration.go says so).
			dm, ok := m.Module.(ctrconf.Declarer)
			if !ok {
				continue
			}
			d, err := dm.Declared(t.Args)
			if err != nil {
				return nil, fmt.Errorf("%s: task %q (explain reads declared values as written; use apply --check for templated ones): %w", t.Pos, t.Name, err)
			}
			for _, h := range hosts {
				out[h.Name] = append(out[h.Name], d)
			}
		}
	}
	return out, nil
}

// origin names where an effective value comes from: the file that wrote
// it, or containerd's default and the file that put the default back.
func origin(file, resetBy string) string {
	switch {
	case file != "":
		return file
	case resetBy != "":
		return "default (reset by " + resetBy + ")"
	}
	return "default"
}

func orAbsent(s string) string {
	if strings.TrimSpace(s) == "" {
		return "absent"
	}
	return s
}

// writeLost prints hidden values grouped by the file that writes them and
// the cause, the cause and what to do said once per group, the values as
// TOML.
func writeLost(w io.Writer, lost []ctrconf.LostKey) {
	type group struct {
		file, reason, cause string
		keys                []string
		vals                map[string]string
	}
	var groups []*group
	idx := map[string]*group{}
	for _, l := range lost {
		id := l.File + "\x00" + l.Reason
		g := idx[id]
		if g == nil {
			g = &group{file: l.File, reason: l.Reason, cause: l.Cause, vals: map[string]string{}}
			idx[id] = g
			groups = append(groups, g)
		}
		g.keys = append(g.keys, l.Key)
		g.vals[l.Key] = l.Written
	}
	for _, g := range groups {
		fmt.Fprintf(w, "    %d value(s) in %s: %s\n", len(g.keys), g.file, g.reason)
		if todo := lostAdvice[g.cause]; todo != "" {
			fmt.Fprintf(w, "      what to do: %s\n", todo)
		}
		fmt.Fprintln(w, ctrconf.RenderTOML(g.keys, g.vals, "      "))
	}
}

// lostAdvice says, per cause, what brings a hidden value back.
var lostAdvice = map[string]string{
	ctrconf.CauseDropped: "run containerd_dropins (it relocates the hiding file or consolidates the values into the file that owns the plugin), or accept them with its accept_shadowed",
	ctrconf.CauseReset:   "run containerd_dropins (it relocates the hiding file or consolidates the values into the file that owns the plugin), or accept them with its accept_shadowed",
	ctrconf.CauseUnknown: "containerd ignores these keys (misspelled, or from another config version): fix or remove them",
}
