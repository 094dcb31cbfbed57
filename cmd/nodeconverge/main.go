// Command nodeconverge converges GPU Kubernetes nodes over SSH: it reads an
// Ansible-style inventory and playbook, plans every change with the node's
// own tools, and applies only what validated. This file parses flags; the
// work is in engine/app.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"nodeconverge/engine/app"
	"nodeconverge/engine/redact"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	"nodeconverge/engine/safetext"
)

// exitError carries an exit code out of cobra without printing twice.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// signalError is the cause of the context a SIGINT or SIGTERM ended.
type signalError struct{ sig syscall.Signal }

func (e *signalError) Error() string { return "by " + signalName(e.sig) }

func signalName(s syscall.Signal) string {
	if s == syscall.SIGINT {
		return "SIGINT"
	}
	return "SIGTERM"
}

// interruptGrace is --interrupt-grace, read by the signal handler's
// message.
var interruptGrace = runner.DefaultInterruptGrace

// abort is closed by a second signal: steps in flight are cut short at once.
var abort = make(chan struct{})

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var got atomic.Pointer[signalError]
	go func() {
		s := (<-sigs).(syscall.Signal)
		se := &signalError{sig: s}
		got.Store(se)
		// Said at once, on stderr: the run may go on for a while.
		fmt.Fprintf(os.Stderr, "nodeconverge: %s: starting nothing new; steps in flight (a containerd restart) finish, or after %s are cut short, the host rolled back and its service started again; a second signal cuts them short now\n",
			signalName(s), interruptGrace)
		cancel(se)
		s = (<-sigs).(syscall.Signal)
		fmt.Fprintf(os.Stderr, "nodeconverge: %s again: cutting steps in flight short; rolling back and restoring service (at most %s)\n", signalName(s), runner.RollbackGrace)
		close(abort)
	}()
	err := root().ExecuteContext(ctx)
	signal.Stop(sigs)
	var ee exitError
	switch {
	case got.Load() != nil:
		// Interrupted: 128 + the signal, as a shell reports a command
		// the signal ended, whatever the hosts did; the recap says what
		// state each host was left in.
		if err != nil && !errors.As(err, &ee) {
			fmt.Fprintln(os.Stderr, "error:", safetext.Indent(redact.Text(err.Error()), "  "))
		}
		os.Exit(128 + int(got.Load().sig))
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		// A render error may quote a secret-named variable's value.
		// Its text may quote a node's or an input's bytes: escaped, and
		// continuation lines indented.
		fmt.Fprintln(os.Stderr, "error:", safetext.Indent(redact.Text(err.Error()), "  "))
		os.Exit(report.ExitFailed)
	}
}

func root() *cobra.Command {
	c := &cobra.Command{
		Use:           "nodeconverge",
		Short:         "Idempotent, validated provisioning of GPU Kubernetes nodes over SSH",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c.AddCommand(applyCmd(), inventoryCmd(), explainCmd())
	return c
}

func applyCmd() *cobra.Command {
	var o app.ApplyOptions
	c := &cobra.Command{
		Use:   "apply -i INVENTORY PLAYBOOK... | apply -i INVENTORY PLAN.json",
		Short: "Converge the hosts of a playbook (with --check: plan only, exit 2 on drift)",
		Long: `Converge the hosts of a playbook.

Exit codes: 0 success (in check mode: nothing to change), 1 a failure,
2 check mode only: changes pending (drift), 4 a host unreachable and nothing failed,
130 interrupted by SIGINT, 143 by SIGTERM.

On SIGINT or SIGTERM nothing new starts; a step in flight on a host (a containerd
restart) finishes, or after --interrupt-grace is cut short, the host rolled back and
its service started again (at most 30s each); a second signal cuts it short at once.
The recap says what state each host was left in.

With --check --out PLAN.json the plan is saved; "apply -i INVENTORY PLAN.json" later
applies exactly that plan, by the plays' serial batches, max_fail_percentage and
handlers as a live apply, and refuses any host whose files changed since.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Playbooks = args
			o.Stdout = cmd.OutOrStdout()
			o.Stderr = cmd.ErrOrStderr()
			o.Abort = abort
			interruptGrace = o.InterruptGrace
			return exit(app.Apply(cmd.Context(), o))
		},
	}
	f := fleetFlags(c, &o.Fleet)
	f.BoolVarP(&o.Check, "check", "C", false, "plan only: change nothing, exit 2 when changes are pending")
	f.BoolVar(&o.Prove, "prove", false, "with --check: also prove each host's running containerd, starting (and removing) a pod sandbox through every runtime the restart handler expects; writes no file, exits 1 when a runtime fails or cannot be proved")
	f.DurationVar(&o.Timeout, "timeout", runner.DefaultTimeout, "bound on each task per host (a task's own timeout: wins); a host past it fails, the others go on")
	f.DurationVar(&o.InterruptGrace, "interrupt-grace", runner.DefaultInterruptGrace, "after SIGINT/SIGTERM, how long steps in flight may finish before they are cut short and their hosts rolled back and restored")
	f.BoolVarP(&o.Diff, "diff", "D", false, "show unified diffs of files and of the effective config")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "show notes, validation evidence and command output")
	f.StringArrayVarP(&o.ExtraVars, "extra-vars", "e", nil, "key=value (or @file.yaml); beats every other variable")
	f.StringVar(&o.Out, "out", "", "with --check: save the plan to FILE (mode 0600; it holds file contents)")
	f.StringArrayVar(&o.Reports, "report", nil, "write a report: json=FILE (versioned JSON), jsonl=FILE (the same, streamed one line per host), html=FILE (the same as one self-contained page) or prom=FILE (Prometheus textfile); with --diff, json, jsonl and html carry the diffs; repeatable")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "print only failures, run errors and the recap; no progress line")
	f.StringVar(&o.StateDir, "state-dir", "", "state directory on the nodes (default /var/lib/nodeconverge)")
	f.StringSliceVarP(&o.Tags, "tags", "t", nil, "only run tasks tagged with these (Ansible's rules: always, never, tagged, untagged, all)")
	f.StringSliceVar(&o.SkipTags, "skip-tags", nil, "run only tasks not tagged with these")
	f.BoolVar(&o.ListHosts, "list-hosts", false, "list the hosts each play targets (after --limit) and run nothing")
	f.BoolVar(&o.ListTasks, "list-tasks", false, "list the tasks each play runs (after --tags/--skip-tags) and run nothing")
	f.BoolVar(&o.SyntaxCheck, "syntax-check", false, "load and check the playbooks (every problem at once) and run nothing")
	return c
}

func inventoryCmd() *cobra.Command {
	var sources, vaultFiles []string
	var list bool
	c := &cobra.Command{
		Use:   "inventory -i INVENTORY [-i INVENTORY...] --list",
		Short: "Print the resolved inventory as JSON (like ansible-inventory --list)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !list {
				return errors.New("inventory: nothing to do; pass --list")
			}
			return app.ListInventory(cmd.Context(), sources, vaultFiles, cmd.OutOrStdout())
		},
	}
	c.Flags().StringArrayVarP(&sources, "inventory", "i", nil, inventoryHelp)
	c.Flags().StringArrayVar(&vaultFiles, "vault-password-file", nil, vaultHelp)
	c.Flags().BoolVar(&list, "list", false, "print hosts, groups and vars as JSON")
	must(c.MarkFlagRequired("inventory"))
	return c
}

func explainCmd() *cobra.Command {
	var o app.ExplainOptions
	c := &cobra.Command{
		Use:   "explain -i INVENTORY [-l HOSTS] [--playbook PLAYBOOK]",
		Short: "Show, per host, which file owns each containerd setting and what is shadowed (measured, read-only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Stdout = cmd.OutOrStdout()
			return exit(app.Explain(cmd.Context(), o))
		},
	}
	f := fleetFlags(c, &o.Fleet)
	f.StringVar(&o.Config, "config", "/etc/containerd/config.toml", "main containerd config on the nodes")
	f.StringVar(&o.Containerd, "containerd", "containerd", "containerd binary on the nodes")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
	f.BoolVar(&o.All, "all", false, "also list keys that are built-in defaults")
	f.StringVar(&o.Playbook, "playbook", "", "also show each value the playbook's containerd_settings tasks declare: in effect or not, and which file decides it")
	f.BoolVar(&o.Prove, "prove", false, "also start (and remove) a pod sandbox through every runtime the daemon loaded; without it, explain only asks the daemon over its CRI API what it loaded")
	return c
}

const (
	inventoryHelp = "inventory source: an Ansible YAML or INI file, or a directory of them; repeatable, merged in order as Ansible does"
	vaultHelp     = "file holding the Ansible Vault password (an executable file is run and prints it); repeatable; ANSIBLE_VAULT_PASSWORD_FILE adds one"
)

// fleetFlags registers the flags of every command that reaches nodes.
func fleetFlags(c *cobra.Command, o *app.Fleet) *pflag.FlagSet {
	f := c.Flags()
	f.StringArrayVarP(&o.Inventories, "inventory", "i", nil, inventoryHelp)
	f.StringArrayVar(&o.VaultPasswordFiles, "vault-password-file", nil, vaultHelp)
	f.StringVarP(&o.Limit, "limit", "l", "", "limit to hosts matching an Ansible pattern (@FILE: patterns from a file, one per line)")
	f.IntVarP(&o.Forks, "forks", "f", 20, "hosts worked on at once")
	f.StringVar(&o.KnownHosts, "known-hosts", "", "known_hosts file (default ~/.ssh/known_hosts)")
	f.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "record unknown host keys (a changed key is always refused)")
	f.StringVar(&o.SSHConfig, "ssh-config", "", "ssh config file (default ~/.ssh/config)")
	f.StringVarP(&o.Connection, "connection", "c", "", "how to reach every host: ssh or local (default: each host's ansible_connection, else ssh)")
	f.StringVar(&o.HostRoot, "host-root", "", "the node's root as mounted in this container (e.g. /host): run locally, chrooted into it (pull mode in a privileged pod)")
	f.StringArrayVar(&o.Redact, "redact", nil, "also redact this key (a name such as client_secret, or a dotted key path); repeatable")
	must(c.MarkFlagRequired("inventory"))
	return f
}

// exit turns a command's exit code into cobra's error convention.
func exit(code int, err error) error {
	switch {
	case err != nil:
		return err
	case code != 0:
		return exitError{code}
	}
	return nil
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
