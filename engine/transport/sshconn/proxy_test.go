package sshconn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestProxyCommand: a ProxyCommand from ssh config (here OpenSSH's own
// `ssh -W %h:%p` through a bastion) carries the connection, with the
// target's host key checked as usual; once the bastion is gone the
// connection is lost.
func TestProxyCommand(t *testing.T) {
	f := newFixture(t)
	bastion := startSSHD(t, []ssh.PublicKey{f.key.pub})
	bkh := writeKnownHosts(t, bastion.knownHostsLine(ssh.KeyAlgoED25519))
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, fmt.Sprintf("Host node1\n  HostName 127.0.0.1\n  Port %d\n"+
		"  ProxyCommand ssh -F /dev/null -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o BatchMode=yes -p %d -W %%h:%%p root@127.0.0.1\n",
		f.srv.port, f.key.path, bkh, bastion.port))
	opts := f.opts
	opts.SSHConfigFile = cfg
	tg := Target{Name: "node1", User: "root", KeyFile: f.key.path}
	c := dial(t, opts, tg)
	if res := run(t, c, "echo via", nil); string(res.Stdout) != "via\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	bastion.kill(t)
	if _, err := c.Run(context.Background(), "true", nil); !IsUnreachable(err) {
		t.Fatalf("Run after the bastion died: want unreachable, got %v", err)
	}
}

// TestProxyCommandFailures: a ProxyCommand that fails is reported with
// what it printed and where it was configured; a host value a shell would
// interpret is refused before anything runs.
func TestProxyCommandFailures(t *testing.T) {
	f := newFixture(t)
	mark := filepath.Join(t.TempDir(), "ran")
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, "# proxies\nHost broken\n  ProxyCommand sh -c 'echo proxy is down >&2; exit 3' %h\n"+
		"Host *\n  ProxyCommand touch "+mark+" %h\n")
	opts := f.opts
	opts.SSHConfigFile = cfg

	_, err := Dial(context.Background(), opts, Target{Name: "broken", User: "root", KeyFile: f.key.path})
	if err == nil || !IsUnreachable(err) || !strings.Contains(err.Error(), "proxy is down") {
		t.Fatalf("failing ProxyCommand: got %v, want unreachable with its stderr", err)
	}

	_, err = Dial(context.Background(), opts, Target{Name: "n", Address: "127.0.0.1;id", User: "root", KeyFile: f.key.path})
	if err == nil || !strings.Contains(err.Error(), cfg+":5") || !strings.Contains(err.Error(), "characters a shell would interpret") {
		t.Fatalf("hostile host name: got %v, want a refusal naming %s:5", err, cfg)
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("the ProxyCommand ran for a hostile host name (stat: %v)", err)
	}
}

func TestExpandProxyCommand(t *testing.T) {
	got, err := expandProxyCommand("ssh -W %h:%p %r@jump # %n %%", "10.0.0.5", "2222", "ops", "gpu-1")
	if err != nil || got != "ssh -W 10.0.0.5:2222 ops@jump # gpu-1 %" {
		t.Errorf("expand = %q, %v", got, err)
	}
	for _, bad := range []string{"$(id)", "a b", "-oProxyCommand=x", "a`b`", "x'y", ""} {
		if _, err := expandProxyCommand("nc %h 22", bad, "22", "u", "a"); err == nil {
			t.Errorf("host %q accepted", bad)
		}
	}
	if _, err := expandProxyCommand("nc %h %C", "h", "22", "u", "a"); err == nil {
		t.Error("unknown token %C accepted")
	}
}
