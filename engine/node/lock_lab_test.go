package node_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/lab/labtest"
	"nodeconverge/lab/labtest/labssh"
)

// TestLabLockFollowsTheSSHConnection checks the lock against a real sshd: the
// holder is the connection's sshd process, a second run is refused with the
// holder's identity, and when the first controller's connection dies
// without releasing (as under SIGKILL) the next run takes the lock over.
func TestLabLockFollowsTheSSHConnection(t *testing.T) {
	ctx := context.Background()
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "none", NoContainerd: true})
	n := l.Nodes[0]
	dial := func() transport.Conn { return labssh.Dial(t, l, n) }
	c1 := dial()
	h1 := node.NewHost(c1, node.HostOptions{RunID: "run-1"})
	l1, err := h1.Lock(ctx, true, node.NewLockOwner("run-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l1.Owner.HolderComm, "sshd") || l1.Owner.HolderPID <= 1 {
		t.Fatalf("holder = %d %q, want the connection's sshd", l1.Owner.HolderPID, l1.Owner.HolderComm)
	}
	comm := strings.TrimSpace(l.Exec(t, n.Name, "cat", "/proc/"+strconv.Itoa(l1.Owner.HolderPID)+"/comm"))
	if comm != l1.Owner.HolderComm {
		t.Errorf("node says pid %d is %q, lock says %q", l1.Owner.HolderPID, comm, l1.Owner.HolderComm)
	}

	c2 := dial()
	defer func() {
		if err := c2.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	h2 := node.NewHost(c2, node.HostOptions{RunID: "run-2"})
	_, err = h2.Lock(ctx, true, node.NewLockOwner("run-2"))
	var held *node.LockHeldError
	if !errors.As(err, &held) || held.Owner.RunID != "run-1" || !strings.Contains(err.Error(), "is locked by run run-1 from host ") {
		t.Fatalf("second run: err = %v, want it locked by run-1", err)
	}

	// The controller of run-1 dies: its connection (and so its sshd) goes.
	l.StopSSHD(t, n.Name)
	if err := c1.Close(); err != nil {
		t.Logf("close of the dead connection: %v", err)
	}
	l.StartSSHD(t, n.Name)
	c3 := dial()
	defer func() {
		if err := c3.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	h3 := node.NewHost(c3, node.HostOptions{RunID: "run-3"})
	l3, err := h3.Lock(ctx, true, node.NewLockOwner("run-3"))
	if err != nil {
		t.Fatalf("lock after the holder's connection died: %v", err)
	}
	if len(l3.TookOver) != 1 || l3.TookOver[0].RunID != "run-1" || !strings.Contains(l3.Note(), "took over the lock") {
		t.Fatalf("took over %+v (note %q), want run-1", l3.TookOver, l3.Note())
	}
	if err := l3.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
