package sshconn

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/transport"
)

// echoSocket serves one line back per connection on a unix socket under dir.
func echoSocket(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "echo.sock")
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					c.Write([]byte("echo " + line))
				}
			}()
		}
	}()
	return p
}

// TestDialSocketForwards: a stream to a unix socket on the node rides the
// host's one connection (OpenSSH direct-streamlocal), and a socket that is
// not there is an error naming it.
func TestDialSocketForwards(t *testing.T) {
	f := newFixture(t)
	c := dial(t, f.opts, f.target())
	sc, ok := c.(transport.SocketConn)
	if !ok {
		t.Fatal("an SSH connection is not a transport.SocketConn")
	}
	p := echoSocket(t, t.TempDir())
	s, err := sc.DialSocket(context.Background(), p)
	if err != nil {
		t.Fatalf("DialSocket: %v", err)
	}
	defer s.Close()
	if _, err := s.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(s).ReadString('\n')
	if err != nil || got != "echo ping\n" {
		t.Errorf("through the forwarded socket: %q, %v", got, err)
	}
	missing := filepath.Join(t.TempDir(), "none.sock")
	if _, err := sc.DialSocket(context.Background(), missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing socket: err = %v, want one naming %s", err, missing)
	}
	if _, err := sc.DialSocket(context.Background(), "relative.sock"); err == nil {
		t.Error("a relative socket path was accepted")
	}
}
