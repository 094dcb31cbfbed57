package copy_test

import (
	"io/fs"
	"testing"

	copymod "nodeconverge/modules/copy"
)

// TestParseMode: octal modes, and symbolic ones that set every class with
// "=" (what Ansible makes of them on any file: trallnag's systemd unit role
// writes u=rw,g=r,o=r); a relative or partial symbolic mode is refused.
func TestParseMode(t *testing.T) {
	for in, want := range map[string]fs.FileMode{
		"0644": 0o644, "644": 0o644, "4755": 0o4755,
		"u=rw,g=r,o=r": 0o644, "a=r,u=rw": 0o644, "ugo=rwx": 0o777, "u=rwx,go=": 0o700, "a=rx,o=": 0o550,
	} {
		got, err := copymod.ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %04o, %v; want %04o", in, got, err, want)
		}
	}
	for _, in := range []string{"u+x", "u=rw,g=r", "go-w", "u=rws,g=r,o=r", "a=r,u+w", "10000", "rw-r--r--", "", "=r"} {
		if got, err := copymod.ParseMode(in); err == nil {
			t.Errorf("ParseMode(%q) = %04o, want an error", in, got)
		}
	}
}
