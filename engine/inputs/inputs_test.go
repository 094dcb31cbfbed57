package inputs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("12345678"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(ok, "playbook", 8); err != nil || string(b) != "12345678" {
		t.Fatalf("a file at the limit: %q, %v", b, err)
	}
	// Sparse: refused from its size, without reading it.
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 50<<20); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(big, "playbook", MaxPlaybook)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Path != big || err.Error() != "too large: 52428800 bytes, over the limit of 4 MiB (4194304 bytes) for a playbook" {
		t.Fatalf("a 50 MB playbook: %v", err)
	}
	// A file whose size stat does not tell is bounded while reading.
	_, err = ReadFile("/dev/zero", "vars file", 1024)
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "more than that, over the limit of 1024 bytes for a vars file") {
		t.Fatalf("/dev/zero: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), "playbook", 8); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}
