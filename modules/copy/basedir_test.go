package copy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/modules/copy"
)

// TestSrcRelativeToPlaybook: a relative src is read from the playbook's
// directory, as in Ansible, whatever the working directory is.
func TestSrcRelativeToPlaybook(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files", "motd"), []byte("from the playbook dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "motd")
	pb := filepath.Join(dir, "site.yaml")
	body := "- name: p\n  hosts: all\n  tasks:\n    - name: t\n      copy:\n        dest: " + dest + "\n        src: files/motd\n"
	if err := os.WriteFile(pb, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	plays, err := playbook.Load(pb)
	if err != nil {
		t.Fatal(err)
	}
	args, err := plays[0].Tasks[0].Render(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	h := node.NewHost(localconn.New("local"), node.HostOptions{StateDir: t.TempDir()})
	plan, err := copy.Module{}.Check(context.Background(), transport.ReadOnly(h), args)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Files) != 1 || string(plan.Files[0].After) != "from the playbook dir\n" {
		t.Fatalf("src not read from the playbook's directory: %+v", plan.Files)
	}
}
