package runtimeopts

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"
)

// TestWinner2xMatchesGoTomlV2 checks the 2.x rule against what containerd
// 2.x does with the options map: go-toml/v2 Marshal, then Unmarshal into a
// struct with the field.
func TestWinner2xMatchesGoTomlV2(t *testing.T) {
	for _, opts := range []map[string]any{
		{"BinaryName": "A", "binaryName": "B"},
		{"binaryname": "C", "BinaryName": "A"},
		{"BINARYNAME": "D", "BinaryName": "A"},
		{"binaryName": "B", "Binaryname": "E"},
		{"binaryName": "B"},
		{"BinaryName": "A", "binaryName": "B", "BINARYNAME": "D", "binaryname": "C"},
	} {
		b, err := toml.Marshal(opts)
		if err != nil {
			t.Fatal(err)
		}
		var s struct{ BinaryName string }
		if err := toml.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		v, k, ok := Decode(2, opts, "BinaryName")
		if !ok || v != s.BinaryName {
			t.Errorf("%v: Decode(2) = %v (key %s), go-toml/v2 decodes %q", opts, v, k, s.BinaryName)
		}
	}
}

// TestDecode1x is go-toml v1's lookup order (BinaryName, binaryname,
// BINARYNAME, binaryName; first found wins; other spellings ignored).
func TestDecode1x(t *testing.T) {
	for _, c := range []struct {
		opts map[string]any
		want any
	}{
		{map[string]any{"BinaryName": "A", "binaryName": "B"}, "A"},
		{map[string]any{"binaryName": "B"}, "B"},
		{map[string]any{"binaryname": "C", "binaryName": "B"}, "C"},
		{map[string]any{"Binaryname": "E"}, nil},
	} {
		v, _, _ := Decode(1, c.opts, "BinaryName")
		if v != c.want {
			t.Errorf("%v: Decode(1) = %v, want %v", c.opts, v, c.want)
		}
	}
}

// TestCanonical (issue 10, defect 2): kubespray's spelling of runc's options
// becomes one key per field, with the value the daemon decodes, and no two
// keys collide.
func TestCanonical(t *testing.T) {
	in := map[string]any{"binaryName": "/usr/local/bin/runc", "systemdCgroup": true, "Extra": 1, "extra": 2}
	for major, want := range map[int]map[string]any{
		1: {"BinaryName": "/usr/local/bin/runc", "SystemdCgroup": true, "extra": 2},
		2: {"BinaryName": "/usr/local/bin/runc", "SystemdCgroup": true, "extra": 2},
	} {
		got := Canonical(major, in, RuncFields)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("major %d (-want +got):\n%s", major, d)
		}
		if c := Collisions(got); len(c) > 0 {
			t.Errorf("major %d: collisions %v", major, c)
		}
	}
	if c := Collisions(in); len(c) != 1 || c[0][0] != "Extra" {
		t.Errorf("Collisions(%v) = %v", in, c)
	}
}
