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
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"nodeconverge/engine/app"
	"nodeconverge/engine/redact"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
)

// exitError carries an exit code out of cobra without printing twice.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root().ExecuteContext(ctx)
	stop()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		// A render error may quote a secret-named variable's value.
		fmt.Fprintln(os.Stderr, "error:", redact.Text(err.Error()))
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
2 check mode only: changes pending (drift), 4 a host unreachable and nothing failed.

With --check --out PLAN.json the plan is saved; "apply -i INVENTORY PLAN.json" later
applies exactly that plan and refuses any host whose files changed since.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Playbooks = args
			o.Stdout = cmd.OutOrStdout()
			o.Stderr = cmd.ErrOrStderr()
			return exit(app.Apply(cmd.Context(), o))
		},
	}
	f := fleetFlags(c, &o.Fleet)
	f.BoolVarP(&o.Check, "check", "C", false, "plan only: change nothing, exit 2 when changes are pending")
	f.DurationVar(&o.Timeout, "timeout", runner.DefaultTimeout, "bound on each task per host (a task's own timeout: wins); a host past it fails, the others go on")
	f.BoolVarP(&o.Diff, "diff", "D", false, "show unified diffs of files and of the effective config")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "show notes, validation evidence and command output")
	f.StringArrayVarP(&o.ExtraVars, "extra-vars", "e", nil, "key=value (or @file.yaml); beats every other variable")
	f.StringVar(&o.Out, "out", "", "with --check: save the plan to FILE (mode 0600; it holds file contents)")
	f.StringArrayVar(&o.Reports, "report", nil, "write a report: json=FILE (versioned JSON) or prom=FILE (Prometheus textfile); repeatable")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "print only failures, run errors and the recap; no progress line")
	f.StringVar(&o.StateDir, "state-dir", "", "state directory on the nodes (default /var/lib/nodeconverge)")
	return c
}

func inventoryCmd() *cobra.Command {
	var path string
	var list bool
	c := &cobra.Command{
		Use:   "inventory -i INVENTORY --list",
		Short: "Print the resolved inventory as JSON (like ansible-inventory --list)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !list {
				return errors.New("inventory: nothing to do; pass --list")
			}
			return app.ListInventory(path, cmd.OutOrStdout())
		},
	}
	c.Flags().StringVarP(&path, "inventory", "i", "", "inventory file")
	c.Flags().BoolVar(&list, "list", false, "print hosts, groups and vars as JSON")
	must(c.MarkFlagRequired("inventory"))
	return c
}

func explainCmd() *cobra.Command {
	var o app.ExplainOptions
	c := &cobra.Command{
		Use:   "explain -i INVENTORY [-l HOSTS]",
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
	return c
}

// fleetFlags registers the flags of every command that reaches nodes.
func fleetFlags(c *cobra.Command, o *app.Fleet) *pflag.FlagSet {
	f := c.Flags()
	f.StringVarP(&o.Inventory, "inventory", "i", "", "inventory file (Ansible YAML)")
	f.StringVarP(&o.Limit, "limit", "l", "", "limit to hosts matching an Ansible pattern")
	f.IntVarP(&o.Forks, "forks", "f", 20, "hosts worked on at once")
	f.StringVar(&o.KnownHosts, "known-hosts", "", "known_hosts file (default ~/.ssh/known_hosts)")
	f.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "record unknown host keys (a changed key is always refused)")
	f.StringVar(&o.SSHConfig, "ssh-config", "", "ssh config file (default ~/.ssh/config)")
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
