// Package app wires the engine together for the command line: it loads the
// inventory and playbooks, dials hosts over SSH, runs, and renders the
// report. cmd/nodeconverge only parses flags and calls it, so everything a
// command does is testable without a process.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/redact"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	"nodeconverge/engine/safetext"
	"nodeconverge/engine/savedplan"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/engine/transport/sshconn"
	"nodeconverge/engine/vault"

	// Every shipped module registers itself.
	_ "nodeconverge/modules/all"
)

// Fleet are the options of every command that reaches nodes: which hosts,
// how many at once, how to trust and reach them, what never to show.
type Fleet struct {
	// Inventories are the -i sources (files or directories), merged in
	// order as Ansible merges them.
	Inventories []string
	// VaultPasswordFiles are the --vault-password-file files (an
	// executable one is run); ANSIBLE_VAULT_PASSWORD_FILE adds one.
	VaultPasswordFiles []string
	// Limit is an Ansible pattern; "@FILE" parts name files of patterns,
	// one per line.
	Limit             string
	Forks             int
	KnownHosts        string
	SSHConfig         string
	AcceptNewHostKeys bool
	// Connection, when set ("ssh" or "local"), overrides every host's
	// ansible_connection (-c/--connection).
	Connection string
	// HostRoot, when set, is the node's root as this process sees it (a
	// privileged container mounting the host's / at it): every host is
	// reached locally, chrooted into HostRoot (--host-root).
	HostRoot string
	// Redact lists more credential keys (names or dotted key paths).
	Redact []string
}

// LoadInventory reads the fleet's inventory sources, with its vault
// passwords.
func (f Fleet) LoadInventory(ctx context.Context) (*inventory.Inventory, error) {
	return loadInventory(ctx, f.Inventories, f.VaultPasswordFiles)
}

func loadInventory(ctx context.Context, sources, vaultFiles []string) (*inventory.Inventory, error) {
	secrets, err := vault.PasswordFiles(ctx, vaultFiles)
	if err != nil {
		return nil, err
	}
	return inventory.LoadSources(sources, inventory.Options{Vault: secrets})
}

// ssh builds the transport options of the fleet's connections.
func (f Fleet) ssh() sshconn.Options {
	return sshconn.Options{
		KnownHostsFile:    f.KnownHosts,
		AcceptNewHostKeys: f.AcceptNewHostKeys,
		SSHConfigFile:     f.SSHConfig,
		UseAgent:          os.Getenv("SSH_AUTH_SOCK") != "",
	}
}

// ApplyOptions are the flags of `nodeconverge apply`.
type ApplyOptions struct {
	Fleet
	Playbooks []string
	Check     bool
	// Prove, with Check, proves every host's running containerd: a pod
	// sandbox started (and removed) through every runtime; no file is
	// written (runner.Options.Prove).
	Prove     bool
	Diff      bool
	Verbose   bool
	ExtraVars []string
	StateDir  string
	// Timeout bounds each task on each host unless the task sets its own
	// `timeout:`; zero means runner.DefaultTimeout.
	Timeout time.Duration
	// InterruptGrace bounds how long steps in flight go on after the
	// apply's context ends (SIGINT/SIGTERM); Abort, closed by a second
	// signal, ends it at once. See runner.Options.
	InterruptGrace time.Duration
	Abort          <-chan struct{}
	// Reports are "json=FILE", "jsonl=FILE", "html=FILE" or "prom=FILE";
	// written whatever the outcome. With Diff, the json, jsonl and html
	// reports carry each result's diff too.
	Reports []string
	// Out, with Check, saves the plan for a later `apply FILE`.
	Out string
	// Quiet prints only failures, run errors and the recap, and never a
	// progress line (--quiet, for cron mail).
	Quiet bool
	// Tags and SkipTags select tasks by their tags (--tags, --skip-tags).
	Tags, SkipTags []string
	// ListHosts, ListTasks and SyntaxCheck print what ansible-playbook's
	// flags of the same names print and run nothing.
	ListHosts, ListTasks, SyntaxCheck bool
	Stdout                            io.Writer
	// Stderr gets the live "TASK [x]: done/total hosts" line when it is a
	// terminal; nil or anything else gets nothing.
	Stderr io.Writer
}

// Dialer returns the runner's Dial function: one connection per host, SSH
// unless the host's ansible_connection (or -c, or --host-root) says local.
func (f Fleet) Dialer() func(ctx context.Context, h *inventory.Host, become bool) (transport.Conn, error) {
	opts := f.ssh()
	return func(ctx context.Context, h *inventory.Host, become bool) (transport.Conn, error) {
		kind, err := f.connection(h)
		if err != nil {
			return nil, err
		}
		if kind == "local" {
			lo := localconn.Options{Root: f.HostRoot}
			if become {
				lo.BecomeUser = h.Conn.BecomeUser
				if lo.BecomeUser == "" {
					lo.BecomeUser = "root"
				}
			}
			return localconn.Dial(h.Name, lo)
		}
		if inventory.SetsProxyCommand(h.Conn.CommonArgs) {
			return nil, fmt.Errorf("%s: ansible_ssh_common_args sets ProxyCommand, a shell command, which nodeconverge does not take from inventory variables; set ProxyCommand in the ssh config (--ssh-config) or use ProxyJump (-J)", h.Name)
		}
		return sshconn.Dial(ctx, opts, Target(h, become))
	}
}

// connectionKinds maps the connection names nodeconverge has (Ansible's
// names for them included) onto its two transports.
var connectionKinds = map[string]string{
	"": "ssh", "ssh": "ssh", "smart": "ssh", "paramiko": "ssh", "paramiko_ssh": "ssh",
	"ansible.builtin.ssh": "ssh", "ansible.builtin.paramiko_ssh": "ssh",
	"local": "local", "ansible.builtin.local": "local",
}

// checkConnection refuses a -c value before any host is touched.
func (f Fleet) checkConnection() error {
	if _, ok := connectionKinds[f.Connection]; !ok {
		return fmt.Errorf("--connection %q: nodeconverge connects with ssh or local", f.Connection)
	}
	return nil
}

// connection is how h is reached: "ssh" or "local". --host-root means the
// node is this machine's host, so it is always local; then -c; then the
// host's ansible_connection. A plugin nodeconverge does not have is
// refused by name.
func (f Fleet) connection(h *inventory.Host) (string, error) {
	if f.HostRoot != "" {
		return "local", nil
	}
	c, from := f.Connection, "--connection"
	if c == "" {
		c, from = h.Conn.Connection, "ansible_connection"
	}
	if kind, ok := connectionKinds[c]; ok {
		return kind, nil
	}
	return "", fmt.Errorf("%s: %s %q is not a connection nodeconverge has (ssh or local)", h.Name, from, c)
}

// Target maps an inventory host to an SSH target.
func Target(h *inventory.Host, become bool) sshconn.Target {
	return sshconn.Target{
		Name: h.Name, Address: h.Conn.Address, Port: h.Conn.Port, User: h.Conn.User,
		KeyFile: h.Conn.KeyFile, ProxyJump: h.Conn.ProxyJump,
		Become: become, BecomeUser: h.Conn.BecomeUser,
	}
}

// Apply runs `nodeconverge apply` and returns the exit code. An error means
// the run could not start; it maps to exit code 1.
func Apply(ctx context.Context, o ApplyOptions) (int, error) {
	redact.Add(o.Redact...)
	if err := o.checkConnection(); err != nil {
		return report.ExitFailed, err
	}
	inv, err := o.LoadInventory(ctx)
	if err != nil {
		return report.ExitFailed, err
	}
	extra, err := playbook.ParseExtraVars(o.ExtraVars)
	if err != nil {
		return report.ExitFailed, fmt.Errorf("--extra-vars: %w", err)
	}
	reps, err := parseReports(o.Reports, report.View{Diff: o.Diff})
	if err != nil {
		return report.ExitFailed, err
	}
	reps.groups = hostGroups(inv)
	maskSecretVars(inv, extra)
	out := o.Stdout
	if out == nil {
		out = os.Stdout
	}
	ropts := runner.Options{
		Check: o.Check, Prove: o.Prove, Forks: o.Forks, Limit: o.Limit, ExtraVars: extra, Timeout: o.Timeout,
		InterruptGrace: o.InterruptGrace, Abort: o.Abort,
		Dial: o.Dialer(), IsUnreachable: sshconn.IsUnreachable,
		// Check mode keeps no memo on the node: it writes nothing
		// there but each script's private directory, removed when the
		// script ends (README, "Check mode").
		HostOptions: node.HostOptions{StateDir: o.StateDir, NoMemoWrites: o.Check},
		Observer:    observer(o, out),
	}
	if o.Verbose {
		ropts.Verbosity = 1
	}
	if len(o.Playbooks) == 1 && savedplan.IsPlanFile(o.Playbooks[0]) {
		if o.Check || o.Out != "" {
			return report.ExitFailed, fmt.Errorf("%s is a saved plan: it is applied as it is (no --check, no --out)", o.Playbooks[0])
		}
		sp, err := savedplan.Load(o.Playbooks[0])
		if err != nil {
			return report.ExitFailed, err
		}
		if err := reps.start(&ropts, false); err != nil {
			return report.ExitFailed, err
		}
		run, err := runner.ApplySaved(ctx, inv, sp, ropts)
		if err != nil {
			return report.ExitFailed, reps.abandon(err)
		}
		return reps.finish(run, out)
	}
	if o.Out != "" && !o.Check {
		return report.ExitFailed, errors.New("--out saves a plan and needs --check")
	}
	if o.Prove && !o.Check {
		return report.ExitFailed, errors.New("--prove is for check mode (--check): an apply proves every restart by itself")
	}
	var plays []*playbook.Play
	byBook := map[string][]*playbook.Play{}
	for _, pb := range o.Playbooks {
		ps, err := playbook.Load(pb)
		if err != nil {
			return report.ExitFailed, err
		}
		ps = playbook.SelectTags(ps, o.Tags, o.SkipTags)
		byBook[pb] = ps
		plays = append(plays, ps...)
	}
	if o.SyntaxCheck || o.ListHosts || o.ListTasks {
		if err := list(out, o, inv, byBook); err != nil {
			return report.ExitFailed, err
		}
		return report.ExitOK, nil
	}
	for _, p := range plays {
		redact.AddVars(p.Vars)
	}
	// A saved plan is made from every result: --out keeps them all.
	if err := reps.start(&ropts, o.Out != ""); err != nil {
		return report.ExitFailed, err
	}
	if o.Out != "" {
		// The plan saved is the hosts' plans, as the run made them.
		run, sp, err := runner.Plan(ctx, inv, plays, o.Playbooks, ropts)
		if run == nil {
			return report.ExitFailed, reps.abandon(err)
		}
		if err == nil {
			err = sp.Write(o.Out)
		}
		if err != nil {
			code, ferr := reps.finish(run, out)
			fmt.Fprintln(out, "ERROR:", safetext.Indent(err.Error(), "  "))
			return max(code, report.ExitFailed), ferr
		}
		return reps.finish(run, out)
	}
	run, err := runner.Run(ctx, inv, plays, ropts)
	if err != nil {
		return report.ExitFailed, reps.abandon(err)
	}
	return reps.finish(run, out)
}

// list prints what --syntax-check, --list-hosts and --list-tasks print,
// shaped like ansible-playbook's output.
func list(w io.Writer, o ApplyOptions, inv *inventory.Inventory, books map[string][]*playbook.Play) error {
	limit, err := inv.LimitSet(o.Limit)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, pb := range o.Playbooks {
		fmt.Fprintf(&b, "\nplaybook: %s\n", pb)
		if o.SyntaxCheck && !o.ListHosts && !o.ListTasks {
			continue
		}
		for i, p := range books[pb] {
			// A play without a name is called by its hosts pattern, as
			// Ansible's Play.get_name does ("play #1 (all): all").
			name := p.Name
			if name == "" {
				name = p.Hosts
			}
			fmt.Fprintf(&b, "\n  play #%d (%s): %s\tTAGS: []\n", i+1, p.Hosts, name)
			if o.ListHosts {
				hs, err := inv.Select(p.Hosts)
				if err != nil {
					return fmt.Errorf("%s: play %q: %w", p.Pos, p.Name, err)
				}
				var names []string
				for _, h := range hs {
					if limit == nil || limit[h.Name] {
						names = append(names, h.Name)
					}
				}
				fmt.Fprintf(&b, "    pattern: ['%s']\n    hosts (%d):\n", strings.Join(strings.Split(p.Hosts, ","), "', '"), len(names))
				for _, n := range names {
					fmt.Fprintf(&b, "      %s\n", safetext.Name(n))
				}
			}
			if o.ListTasks {
				b.WriteString("    tasks:\n")
				var inc *playbook.Include
				for _, t := range p.Tasks {
					if t.OnFailure() {
						// Ansible lists a block's own tasks, not its
						// rescue: or always:.
						continue
					}
					// A role's task is "role : name", as Ansible lists it;
					// Ansible lists a task's tags sorted. A dynamic
					// include's tasks are listed as the include, once.
					name, tags := t.DisplayName(), t.Tags
					if t.IncludedBy != nil {
						if t.IncludedBy == inc {
							continue
						}
						inc = t.IncludedBy
						name, tags = inc.Name, inc.Tags
					}
					tags = append([]string(nil), tags...)
					sort.Strings(tags)
					fmt.Fprintf(&b, "      %s\tTAGS: [%s]\n", safetext.Line(name), safetext.Line(strings.Join(tags, ", ")))
				}
			}
		}
	}
	_, err = io.WriteString(w, safetext.Block(b.String()))
	return err
}

// maskSecretVars masks, in everything the run shows or reports, the values
// of the inventory's and the command line's variables whose names look
// like credentials (redact.Name: registry_password, api_token, ...), so a
// secret used in a command line or a message is hidden even without
// no_log. Play vars are added as the playbooks load. Every value that
// came out of a vault is masked too, whatever its variable is called.
func maskSecretVars(inv *inventory.Inventory, extra map[string]any) {
	sets := []map[string]any{extra}
	for _, h := range inv.Hosts {
		sets = append(sets, h.Vars)
	}
	redact.AddVars(sets...)
	redact.AddValues(inv.Secrets()...)
}

// observer builds the human output: everything, --quiet's failures and
// recap, or everything under a progress line on an interactive stderr.
func observer(o ApplyOptions, out io.Writer) report.Observer {
	human := &report.Human{W: out, Diff: o.Diff, Verbose: o.Verbose}
	switch {
	case o.Quiet:
		return &report.Quiet{Next: human}
	case o.Stderr != nil && report.IsTerminal(o.Stderr):
		return &report.Progress{W: o.Stderr, TTY: true, Next: human}
	}
	return human
}

// reports are the run's --report outputs: files written whole when the
// run ends (json, prom) and streams written host by host as hosts are done
// (jsonl).
type reports struct {
	view    report.View
	whole   map[string]func(io.Writer, *report.Run) error
	jsonl   []string
	streams []*report.JSONLines
	// keep says a report needs every result when the run ends (json,
	// html).
	keep bool
	// groups are the inventory groups of every host, for the whole
	// reports.
	groups map[string][]string
}

// hostGroups maps each host of the inventory to its groups, "all" left out
// (every host is in it).
func hostGroups(inv *inventory.Inventory) map[string][]string {
	out := make(map[string][]string, len(inv.Hosts))
	for name, h := range inv.Hosts {
		var gs []string
		for _, g := range h.Groups {
			if g != "all" {
				gs = append(gs, g)
			}
		}
		out[name] = gs
	}
	return out
}

// parseReports parses --report values before the run, so a typo does not
// cost a whole fleet run.
func parseReports(specs []string, view report.View) (*reports, error) {
	rs := &reports{view: view, whole: map[string]func(io.Writer, *report.Run) error{}}
	for _, s := range specs {
		kind, path, ok := strings.Cut(s, "=")
		if !ok || path == "" {
			return nil, fmt.Errorf("--report %q: want json=FILE, jsonl=FILE, html=FILE or prom=FILE", s)
		}
		switch kind {
		case "json":
			rs.whole[path] = view.WriteJSON
			rs.keep = true
		case "html":
			rs.whole[path] = view.WriteHTML
			rs.keep = true
		case "jsonl":
			rs.jsonl = append(rs.jsonl, path)
		case "prom":
			prev := report.PreviousSuccess(path)
			rs.whole[path] = func(w io.Writer, r *report.Run) error { return report.WritePromSince(w, r, prev) }
		default:
			return nil, fmt.Errorf("--report %q: unknown format %q (json, jsonl, html, prom)", s, kind)
		}
	}
	return rs, nil
}

// start opens the streams and tells the runner what to do with a host
// that is done: hand it to the streams, and forget its results unless a
// report (json) or a saved plan (keep) needs them at the end.
func (rs *reports) start(o *runner.Options, keep bool) error {
	for _, path := range rs.jsonl {
		j, err := rs.view.CreateJSONLines(path)
		if err != nil {
			return rs.abandon(err)
		}
		rs.streams = append(rs.streams, j)
	}
	if len(rs.streams) > 0 {
		o.Sink = sinks(rs.streams)
	}
	o.Drop = !rs.keep && !keep
	return nil
}

// abandon removes the streams of a run that did not start and returns
// err, with any failure to remove them.
func (rs *reports) abandon(err error) error {
	for _, j := range rs.streams {
		if aerr := j.Abandon(); aerr != nil {
			err = fmt.Errorf("%w; %w", err, aerr)
		}
	}
	rs.streams = nil
	return err
}

// finish closes the streams, writes the whole reports and returns the
// run's exit code.
func (rs *reports) finish(run *report.Run, out io.Writer) (int, error) {
	code := run.ExitCode()
	if rs.groups != nil {
		groups := map[string][]string{}
		for _, h := range run.SortedHosts() {
			if gs := rs.groups[h]; len(gs) > 0 {
				groups[h] = gs
			}
		}
		run.SetGroups(groups)
	}
	fail := func(err error) {
		// A report that cannot be written is a failure of the run: a
		// nightly job must not mistake silence for "in sync".
		fmt.Fprintln(out, "ERROR:", err)
		code = report.ExitFailed
	}
	for _, j := range rs.streams {
		if err := j.Close(run); err != nil {
			fail(err)
		}
	}
	for path, w := range rs.whole {
		if err := report.WriteFileAtomic(path, func(f io.Writer) error { return w(f, run) }); err != nil {
			fail(err)
		}
	}
	return code, nil
}

// sinks hands a host's report to every stream.
type sinks []*report.JSONLines

// Host implements report.HostSink.
func (ss sinks) Host(r *report.Run, hr *report.HostReport) {
	for _, j := range ss {
		j.Host(r, hr)
	}
}

// ListInventory prints the resolved inventory as JSON, as
// `ansible-inventory --list` does: an inline vaulted value as its
// envelope, a value from an encrypted vars file decrypted.
func ListInventory(ctx context.Context, sources, vaultFiles []string, w io.Writer) error {
	inv, err := loadInventory(ctx, sources, vaultFiles)
	if err != nil {
		return err
	}
	b, err := inv.ListJSON()
	if err != nil {
		return fmt.Errorf("render inventory: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	return nil
}
