package sshconn

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProxyCommand.
//
// As OpenSSH does, the command line from ssh config is run by the local
// user's shell ($SHELL, or /bin/sh) as `exec <command>`, after %h (the
// host to connect to, HostName applied), %n (the name as given), %p, %r
// (the remote user) and %% are expanded; the command's stdin and stdout
// are the connection, its stderr is kept for error messages. The command
// line is the operator's own configuration and may use the shell; the
// substituted values come from inventories and must stay data, so a value
// holding anything but letters, digits and . _ - : @ (or starting with -)
// is refused, as OpenSSH 9.6 refuses such host and user names for %h and
// %r. A ProxyCommand applies only to the target's own connection: jump
// hosts (ProxyJump) never run one, and an inventory's ProxyJump wins over
// it.

// proxyConn is a net.Conn over a ProxyCommand's standard input and output.
type proxyConn struct {
	cmd    *exec.Cmd
	r      *os.File // the command's stdout
	w      *os.File // the command's stdin
	stderr *tailBuffer
	addr   proxyAddr
	waited chan struct{}
	// waitErr is how the command ended; read after waited is closed.
	waitErr error
	once    sync.Once
	err     error // from Close
}

// proxyAddr stands for the far end of a proxied connection: the host and
// port the command was asked to reach, which is what known_hosts is
// checked against.
type proxyAddr string

// Network names the kind of connection, for net.Addr.
func (a proxyAddr) Network() string { return "proxycommand" }

// String is host:port, which known_hosts checks parse.
func (a proxyAddr) String() string { return string(a) }

// tailBuffer keeps the last bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const proxyStderrTail = 2048

// Write keeps the last proxyStderrTail bytes; it never fails, so the
// command never blocks on its stderr.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > proxyStderrTail {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-proxyStderrTail:]...)
	}
	return len(p), nil
}

// String is what was kept, trimmed.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}

// validProxyToken accepts a value that is safe to substitute into a shell
// command line.
func validProxyToken(v string) bool {
	if v == "" || v[0] == '-' {
		return false
	}
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == ':', c == '@':
		default:
			return false
		}
	}
	return true
}

// expandProxyCommand substitutes the tokens OpenSSH expands in
// ProxyCommand. An unknown token is an error rather than a guess.
func expandProxyCommand(line, host, port, user, alias string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] != '%' {
			b.WriteByte(line[i])
			continue
		}
		if i+1 == len(line) {
			return "", errors.New("ends with a lone %")
		}
		i++
		var name, v string
		switch line[i] {
		case '%':
			b.WriteByte('%')
			continue
		case 'h':
			name, v = "host", host
		case 'n':
			name, v = "host name as given", alias
		case 'p':
			name, v = "port", port
		case 'r':
			name, v = "remote user", user
		default:
			return "", fmt.Errorf("token %%%c is not supported (only %%h %%n %%p %%r %%%%)", line[i])
		}
		if !validProxyToken(v) {
			return "", fmt.Errorf("the %s %q (for %%%c) has characters a shell would interpret; refusing to run it", name, v, line[i])
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// startProxy runs the ProxyCommand for ep; at is where ssh config set it.
func startProxy(command, at string, ep endpoint, alias string) (*proxyConn, error) {
	line, err := expandProxyCommand(command, ep.host, ep.port, ep.user, alias)
	if err != nil {
		return nil, fmt.Errorf("ProxyCommand (%s): %w", at, err)
	}
	shell := os.Getenv("SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("ProxyCommand (%s): %w", at, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("ProxyCommand (%s): %w", at, err)
	}
	p := &proxyConn{r: outR, w: inW, stderr: &tailBuffer{}, addr: proxyAddr(ep.addr()), waited: make(chan struct{})}
	p.cmd = exec.Command(shell, "-c", "exec "+line)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = inR, outW, p.stderr
	// Its own process group, so Close ends whatever it started too.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = p.cmd.Start()
	// The child has its ends; the parent keeps only its own.
	inR.Close()
	outW.Close()
	if err != nil {
		outR.Close()
		inW.Close()
		return nil, fmt.Errorf("ProxyCommand (%s): start %s: %w", at, shell, err)
	}
	go func() {
		// A proxy that dies shows as EOF on the connection; describe
		// explains it with this status and the command's stderr.
		p.waitErr = p.cmd.Wait()
		close(p.waited)
	}()
	return p, nil
}

// Read reads what the command printed: bytes from the server.
func (p *proxyConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// Write feeds the command: bytes for the server.
func (p *proxyConn) Write(b []byte) (int, error) { return p.w.Write(b) }

// Close ends the command: its stdin is closed and its process group
// killed (a proxy has nothing to flush once the SSH connection is done).
func (p *proxyConn) Close() error {
	p.once.Do(func() {
		p.w.Close()
		// ESRCH: the group is gone already, and Wait reaps the leader.
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			if kerr := p.cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
				p.err = fmt.Errorf("end ProxyCommand (pid %d): %w", p.cmd.Process.Pid, kerr)
			}
		}
		<-p.waited
		p.r.Close()
	})
	return p.err
}

// describe adds how the command ended and its stderr to err, a failure of
// the connection it carried.
func (p *proxyConn) describe(err error) error {
	status := "running"
	select {
	case <-p.waited:
		status = "exited"
		if p.waitErr != nil {
			status = p.waitErr.Error()
		}
	default:
	}
	if s := p.stderr.String(); s != "" {
		return fmt.Errorf("%w (ProxyCommand %s; it said: %s)", err, status, s)
	}
	return fmt.Errorf("%w (ProxyCommand %s)", err, status)
}

// LocalAddr has no address to give; net.Conn needs one.
func (p *proxyConn) LocalAddr() net.Addr { return proxyAddr("local") }

// RemoteAddr is the host and port the command was asked to reach.
func (p *proxyConn) RemoteAddr() net.Addr { return p.addr }

// SetDeadline sets both pipes' deadlines.
func (p *proxyConn) SetDeadline(t time.Time) error {
	return errors.Join(p.r.SetDeadline(t), p.w.SetDeadline(t))
}

// SetReadDeadline bounds reads from the command.
func (p *proxyConn) SetReadDeadline(t time.Time) error { return p.r.SetReadDeadline(t) }

// SetWriteDeadline bounds writes to the command.
func (p *proxyConn) SetWriteDeadline(t time.Time) error { return p.w.SetWriteDeadline(t) }
