package copy_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	copymod "nodeconverge/modules/copy"
)

// TestRegisteredResult: copy's plan carries Ansible's dest, checksum, size
// and state, when it changes the file and when it does not (a handler
// looping over a template task's results reads item.dest).
func TestRegisteredResult(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "unit.service")
	body := "[Unit]\n"
	sum := sha1.Sum([]byte(body))
	for _, exists := range []bool{false, true} {
		if exists {
			if err := os.WriteFile(dest, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// A fresh host each time: its read cache would remember the absent file.
		h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(t.TempDir(), "state"), RunID: "20260101T000000Z-test"})
		a := &copymod.Args{Dest: dest, Content: &body, Mode: "0644"}
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
		plan, err := copymod.Module{}.Check(context.Background(), transport.ReadOnly(h), a)
		if err != nil {
			t.Fatal(err)
		}
		if plan.Changed() == exists {
			t.Errorf("exists %v: changed %v", exists, plan.Changed())
		}
		v := plan.Vars
		if v["dest"] != dest || v["checksum"] != hex.EncodeToString(sum[:]) || v["size"] != len(body) || v["state"] != "file" {
			t.Errorf("exists %v: registered %v", exists, v)
		}
	}
}
