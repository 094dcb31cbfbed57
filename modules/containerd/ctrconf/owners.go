package ctrconf

import (
	"context"

	"nodeconverge/engine/module"
)

// Ownership of effective values is decided per play, not per module: a
// candidate's dump that moves a value another task of the same play
// declares, to the value that task declares, is that task's change and no
// reason for this one to refuse (issue 28). The runner hands each Check its
// play (module.PlayOf); the arguments of the play's other tasks say what
// they own through the interfaces below, so no containerd module imports
// another.

// Owner is implemented by the arguments of a task that declares values of
// containerd's effective configuration.
type Owner interface {
	// Declares reports whether the task owns the Flatten key of a dump by
	// a containerd of major version major and, if it declares one value
	// there, that value's canonical text ("" when it owns whatever the key
	// holds, as containerd_nvidia owns the tables of its runtimes).
	Declares(key string, major int) (value string, ok bool)
}

// MirrorsOwner is implemented by the arguments of a task that moves the
// CRI plugin's registry mirrors into hosts.toml files (containerd_hosts
// with migrate_mirrors): a tree that holds mirrors together with a
// config_path is that task's to repair, not another task's reason to
// refuse the host.
type MirrorsOwner interface {
	MigratesMirrors() bool
}

// PlayDeclares names the other task of ctx's play that owns key with the
// value after (canonical text, as a Diff shows it): "" when none does.
func PlayDeclares(ctx context.Context, key, after string, major int) string {
	for _, t := range module.PlayOf(ctx).Others() {
		o, ok := t.Args.(Owner)
		if !ok {
			continue
		}
		if v, ok := o.Declares(key, major); ok && (v == "" || v == after) {
			return t.Name
		}
	}
	return ""
}

// PlayMigratesMirrors names the other task of ctx's play that moves
// registry mirrors into hosts.toml files, "" when none does.
func PlayMigratesMirrors(ctx context.Context) string {
	for _, t := range module.PlayOf(ctx).Others() {
		if m, ok := t.Args.(MirrorsOwner); ok && m.MigratesMirrors() {
			return t.Name
		}
	}
	return ""
}
