package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListHostsLimitFile: --list-hosts takes -l @FILE as a run does (the
// listing once resolved --limit with Select, which has no @FILE).
func TestListHostsLimitFile(t *testing.T) {
	write := testWriter(t)
	inv := write("inv.yaml", "all:\n  hosts:\n    a1: {}\n    a2: {}\n    b1: {}\n")
	limit := write("limit.txt", "a1\nb1\n")
	pb := write("pb.yaml", "- hosts: all\n  tasks:\n    - command:\n        argv: [\"true\"]\n")
	var out bytes.Buffer
	code, err := Apply(context.Background(), ApplyOptions{
		Fleet:     Fleet{Inventories: []string{inv}, Limit: "@" + limit},
		Playbooks: []string{pb}, ListHosts: true, Stdout: &out,
	})
	if err != nil || code != 0 {
		t.Fatalf("exit %d, err %v\n%s", code, err, out.String())
	}
	got := out.String()
	if !strings.Contains(got, "a1") || !strings.Contains(got, "b1") || strings.Contains(got, "a2") {
		t.Fatalf("--list-hosts -l @%s printed:\n%s", limit, got)
	}
}

// testWriter returns a function that writes a file into a fresh temporary
// directory and returns its path.
func testWriter(t *testing.T) func(name, body string) string {
	t.Helper()
	dir := t.TempDir()
	return func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}
