// Package labssh connects tests to lab nodes over the product's own SSH
// transport, with the lab's key and known_hosts. It lives apart from
// labtest, which imports nothing of the repository so that every package
// can use it.
package labssh

import (
	"context"
	"testing"
	"time"

	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/sshconn"
	"nodeconverge/lab/labtest"
)

// Dial opens a connection to node n of l as root, verified against the
// lab's known_hosts, and closes it when the test ends.
func Dial(t testing.TB, l *labtest.Lab, n labtest.Node) transport.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sshconn.Dial(ctx, sshconn.Options{KnownHostsFile: l.KnownHosts, SSHConfigFile: "/dev/null"},
		sshconn.Target{Name: n.Name, Address: n.Addr, Port: n.Port, User: "root", KeyFile: l.KeyFile})
	if err != nil {
		t.Fatalf("dial %s: %v", n.Name, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close %s: %v", n.Name, err)
		}
	})
	return c
}
