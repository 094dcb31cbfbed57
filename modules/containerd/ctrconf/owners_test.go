package ctrconf

import (
	"context"
	"testing"

	"nodeconverge/engine/module"
)

type declares map[string]string

func (declares) Validate() error { return nil }
func (d declares) Declares(key string, _ int) (string, bool) {
	v, ok := d[key]
	return v, ok
}

type migrates bool

func (migrates) Validate() error         { return nil }
func (m migrates) MigratesMirrors() bool { return bool(m) }

// TestPlayOwnership: a value another task of the play declares is that
// task's when the change brings it to the declared value (or the task owns
// the key whatever it holds); the task being checked is never its own
// other, and outside a play nothing is owned.
func TestPlayOwnership(t *testing.T) {
	key := `plugins."io.containerd.cri.v1.images".registry.config_path`
	rt := `plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.runtime_type`
	play := module.Play{Self: 1, Tasks: []module.PlayTask{
		{Name: "settings", Args: declares{key: `"/etc/containerd/certs.d"`}},
		{Name: "me", Args: declares{key: `"/elsewhere"`}},
		{Name: "runtimes", Args: declares{rt: ""}},
		{Name: "mirrors", Args: migrates(true)},
	}}
	ctx := module.WithPlay(context.Background(), play)
	if got := PlayDeclares(ctx, key, `"/etc/containerd/certs.d"`, 2); got != "settings" {
		t.Errorf("declared value: owner %q, want settings", got)
	}
	if got := PlayDeclares(ctx, key, `""`, 2); got != "" {
		t.Errorf("a change away from the declared value is owned by %q", got)
	}
	if got := PlayDeclares(ctx, key, `"/elsewhere"`, 2); got != "" {
		t.Errorf("the checked task's own declaration counted: %q", got)
	}
	if got := PlayDeclares(ctx, rt, `"anything"`, 2); got != "runtimes" {
		t.Errorf("a key owned whatever its value: %q", got)
	}
	if got := PlayMigratesMirrors(ctx); got != "mirrors" {
		t.Errorf("migrator %q", got)
	}
	if PlayDeclares(context.Background(), key, `"/etc/containerd/certs.d"`, 2) != "" || PlayMigratesMirrors(context.Background()) != "" {
		t.Error("outside a play something is owned")
	}
}
