// Package sshconn implements transport.Conn over one SSH connection per host
// (golang.org/x/crypto/ssh), the way an operator's own `ssh` would connect:
// host keys are verified against known_hosts, ~/.ssh/config supplies
// HostName, User, Port, IdentityFile, ProxyJump and ProxyCommand (see
// proxy.go), keys come from files and ssh-agent, and jump hosts are chained.
//
// # Running a script
//
// Conn.Run must deliver a script and then arbitrary (binary) stdin on one
// stream. `sh -s` cannot do that portably: dash reads its input in blocks,
// so a command in the script that reads stdin would get the rest of the
// script. Instead every session runs a fixed bootstrap with `sh -c` that
// reads exactly the script's byte count from stdin into a variable, checks
// that an end marker arrived (so a connection cut mid-script never runs a
// truncated script), and evals it; the script's stdin is then exactly the
// caller's bytes. The exact read uses `head -c N` when the node's head is
// proven not to read ahead (GNU), found by a probe run once per connection,
// and `dd bs=1 count=N` otherwise (busybox), which is slower but exact.
//
// The bootstrap prints a start marker to stderr first (stripped from the
// result), so a `sudo -n` that refused to start the shell is told apart from
// a script that failed.
package sshconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"nodeconverge/engine/transport"
)

// Options are the connection settings shared by every host of a run.
type Options struct {
	KnownHostsFile    string        // "" = ~/.ssh/known_hosts
	AcceptNewHostKeys bool          // like OpenSSH StrictHostKeyChecking=accept-new: record unknown keys, still refuse changed ones
	SSHConfigFile     string        // "" = ~/.ssh/config (missing file is fine)
	ConnectTimeout    time.Duration // 0 = 10s; bounds TCP connect plus SSH handshake, per hop
	IdentityFiles     []string      // extra default keys; ~/.ssh/id_ed25519, id_ecdsa, id_rsa are tried when present and no key is configured for the host
	UseAgent          bool          // use SSH_AUTH_SOCK when set; NewOptions turns it on
}

// NewOptions returns the defaults: ~/.ssh files, a 10s connect timeout and
// the ssh-agent when one is running.
func NewOptions() Options {
	return Options{ConnectTimeout: defaultConnectTimeout, UseAgent: true}
}

// Target is one host to connect to. Fields set here win over ~/.ssh/config,
// as Ansible's ansible_* variables do when it passes them to ssh as -o.
type Target struct {
	Name       string // inventory name (also the Host to look up in ssh config when Address is empty)
	Address    string // host to connect to; looked up in ssh config (its HostName applies)
	Port       int    // 0 = from ssh config or 22
	User       string // "" = from ssh config or current user
	KeyFile    string // private key tried first; must exist
	ProxyJump  string // "user@host:port" or "host" (ssh-config alias allowed); comma-separated chain; "none" disables the ssh config's. Hops use their ssh config, then KeyFile.
	Become     bool   // run scripts through `sudo -n` (skipped when already that user)
	BecomeUser string // default root
}

const (
	defaultConnectTimeout = 10 * time.Second
	// maxSessions stays under OpenSSH's default MaxSessions (10) so that
	// callers running many commands at once queue here instead of
	// getting "administratively prohibited" from the server.
	maxSessions = 6
	// keepaliveInterval and keepaliveTimeout detect a dead peer during a
	// long run (a rebooted node, a dropped NAT entry) so the next Run
	// fails fast instead of hanging on a TCP retransmit timer.
	keepaliveInterval = 30 * time.Second
	keepaliveTimeout  = 15 * time.Second
	// sessionRetryWindow is how long a refused session open is retried.
	sessionRetryWindow = 2 * time.Second
)

// endpoint is one SSH server to connect to, fully resolved.
type endpoint struct {
	host     string
	port     string
	user     string
	explicit []keyFile
	defaults []keyFile
	// alias is the name the host was given as (ProxyCommand's %n);
	// proxyCmd, set from ssh config, carries the connection instead of
	// TCP, and proxyAt says where it was set.
	alias    string
	proxyCmd string
	proxyAt  string
}

func (e endpoint) addr() string { return net.JoinHostPort(e.host, e.port) }

// conn is the transport.Conn returned by Dial.
type conn struct {
	name      string
	loginUser string
	sudoUser  string // "" when scripts run as the login user
	client    *ssh.Client
	jumps     []*ssh.Client // in connection order; closed in reverse
	sessions  chan struct{}

	// forceDD makes sessions use the portable dd reader even where head
	// is exact; tests use it to prove dd round-trips every byte.
	forceDD bool
	// headKind is what the node's head is, once a session has probed it
	// (headUnknown until then): each probe costs the node a subshell and
	// two processes, and a converge opens a dozen sessions per node.
	headKind atomic.Int32

	// redial opens a fresh connection to the same node, to end a
	// cancelled command when this connection no longer answers (its sshd
	// session stopped or hung).
	redial func(ctx context.Context) (*conn, error)

	stop        chan struct{}
	closeOnce   sync.Once
	clientsOnce sync.Once
	closeErr    error
}

// Dial connects to t, through its jump hosts if any, and returns a
// connection that multiplexes sessions. The caller closes it.
func Dial(ctx context.Context, opts Options, t Target) (transport.Conn, error) {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = defaultConnectTimeout
	}
	if opts.KnownHostsFile == "" {
		opts.KnownHostsFile = filepath.Join(homeDir(), ".ssh", "known_hosts")
	}
	if opts.SSHConfigFile == "" {
		opts.SSHConfigFile = filepath.Join(homeDir(), ".ssh", "config")
	}
	alias := t.Address
	if alias == "" {
		alias = t.Name
	}
	if alias == "" {
		return nil, errors.New("ssh: target has neither a name nor an address")
	}
	name := t.Name
	if name == "" {
		name = alias
	}
	cfg, err := loadSSHConfig(opts.SSHConfigFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	port := ""
	if t.Port != 0 {
		port = strconv.Itoa(t.Port)
	}
	ep, cfgJump := resolve(cfg, opts, alias, t.User, port, t.KeyFile)
	jump := t.ProxyJump
	if jump == "" {
		jump = cfgJump
	} else {
		// The inventory's ProxyJump wins over ssh config, whichever
		// of ProxyJump and ProxyCommand the config set.
		ep.proxyCmd = ""
	}
	var hops []endpoint
	if jump != "" && !strings.EqualFold(jump, "none") {
		for _, h := range strings.Split(jump, ",") {
			u, host, p, err := parseHop(strings.TrimSpace(h))
			if err != nil {
				return nil, fmt.Errorf("%s: proxy jump %q: %w", name, jump, err)
			}
			// A hop's own ProxyJump from ssh config is not
			// followed: the chain is exactly what was given.
			hop, _ := resolve(cfg, opts, host, u, p, "")
			hop.proxyCmd = ""
			// The target's key is also offered to jump hosts
			// (after their own), since one --private-key for a
			// whole fleet usually opens its bastion too.
			if t.KeyFile != "" {
				hop.defaults = append(hop.defaults, keyFile{path: expandTilde(t.KeyFile)})
			}
			hops = append(hops, hop)
		}
	}

	hk := &hostKeys{file: opts.KnownHostsFile, accept: opts.AcceptNewHostKeys}
	c := &conn{
		name:      name,
		loginUser: ep.user,
		sessions:  make(chan struct{}, maxSessions),
		stop:      make(chan struct{}),
	}
	var via *ssh.Client
	for _, hop := range hops {
		jc, err := connect(ctx, opts, hk, hop, via)
		if err != nil {
			c.closeClients()
			return nil, fmt.Errorf("%s: via jump host %s: %w", name, hop.addr(), err)
		}
		c.jumps = append(c.jumps, jc)
		via = jc
	}
	c.client, err = connect(ctx, opts, hk, ep, via)
	if err != nil {
		c.closeClients()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if t.Become {
		bu := t.BecomeUser
		if bu == "" {
			bu = "root"
		}
		if bu != ep.user {
			c.sudoUser = bu
		}
	}
	c.redial = func(ctx context.Context) (*conn, error) {
		nc, err := Dial(ctx, opts, t)
		if err != nil {
			return nil, err
		}
		return nc.(*conn), nil
	}
	go c.keepalive()
	return c, nil
}

// resolve applies ssh config to a host alias; explicit values win.
func resolve(cfg *sshConfig, opts Options, alias, user, port, keyFile string) (endpoint, string) {
	hc := cfg.lookup(alias)
	ep := endpoint{host: alias, port: port, user: user, alias: alias}
	if hc.ProxyCommand != "" && !strings.EqualFold(hc.ProxyCommand, "none") {
		ep.proxyCmd, ep.proxyAt = hc.ProxyCommand, hc.ProxyCommandAt
	}
	if hc.HostName != "" {
		ep.host = hc.HostName
	}
	if ep.port == "" {
		ep.port = hc.Port
	}
	if ep.port == "" {
		ep.port = "22"
	}
	if ep.user == "" {
		ep.user = hc.User
	}
	if ep.user == "" {
		ep.user = localUser()
	}
	ep.explicit, ep.defaults = keyFiles(keyFile, hc.IdentityFiles, opts.IdentityFiles, ep.host, ep.user, ep.port)
	return ep, hc.ProxyJump
}

// parseHop splits one ProxyJump element: [ssh://][user@]host[:port], with
// IPv6 addresses in brackets.
func parseHop(s string) (user, host, port string, err error) {
	s = strings.TrimPrefix(s, "ssh://")
	if i := strings.LastIndex(s, "@"); i >= 0 {
		user, s = s[:i], s[i+1:]
	}
	switch {
	case s == "":
		return "", "", "", errors.New("empty host")
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		host = s[1 : len(s)-1]
	case strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1:
		host, port, err = net.SplitHostPort(s)
		if err != nil {
			return "", "", "", fmt.Errorf("parse %q: %w", s, err)
		}
		if _, err := strconv.Atoi(port); err != nil {
			return "", "", "", fmt.Errorf("bad port in %q", s)
		}
	default:
		host = s
	}
	return user, host, port, nil
}

// connect opens one SSH connection to ep, directly or tunnelled through via.
func connect(ctx context.Context, opts Options, hk *hostKeys, ep endpoint, via *ssh.Client) (*ssh.Client, error) {
	addr := ep.addr()
	dctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	var nc net.Conn
	var err error
	var proxy *proxyConn
	switch {
	case via != nil:
		nc, err = via.DialContext(dctx, "tcp", addr)
	case ep.proxyCmd != "":
		proxy, err = startProxy(ep.proxyCmd, ep.proxyAt, ep, ep.alias)
		if err != nil {
			return nil, err
		}
		nc = proxy
	default:
		var d net.Dialer
		nc, err = d.DialContext(dctx, "tcp", addr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to %s: %w", addr, ctx.Err())
		}
		return nil, unreachable("connect to %s: %w", addr, err)
	}
	algos, err := hk.algorithms(addr)
	if err != nil {
		nc.Close()
		return nil, err
	}
	auth, err := buildAuth(ep.explicit, ep.defaults, opts.UseAgent)
	if err != nil {
		nc.Close()
		return nil, err
	}
	defer auth.close()
	var hkErr error
	check := hk.callback()
	cfg := &ssh.ClientConfig{
		User: ep.user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(auth.signers...)},
		HostKeyCallback: func(h string, r net.Addr, k ssh.PublicKey) error {
			hkErr = check(h, r, k)
			return hkErr
		},
		HostKeyAlgorithms: algos,
		Timeout:           opts.ConnectTimeout,
	}
	// The handshake has no context of its own; closing the socket is what
	// interrupts it, and it works for tunnelled connections too, which
	// do not support deadlines.
	stop := context.AfterFunc(dctx, func() { nc.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	interrupted := !stop()
	if err == nil && interrupted {
		sc.Close()
		err = errors.New("interrupted")
	}
	if err != nil {
		switch {
		case hkErr != nil:
			return nil, hkErr
		case interrupted && ctx.Err() != nil:
			return nil, fmt.Errorf("ssh handshake with %s: %w", addr, ctx.Err())
		case interrupted && proxy != nil:
			return nil, unreachable("ssh handshake with %s timed out after %s: %w", addr, opts.ConnectTimeout, proxy.describe(errors.New("no answer")))
		case interrupted:
			return nil, unreachable("ssh handshake with %s timed out after %s", addr, opts.ConnectTimeout)
		case isAuthError(err):
			return nil, fmt.Errorf("authenticate %s@%s: %w (%s)", ep.user, addr, err, auth.hint())
		case proxy != nil:
			return nil, unreachable("ssh handshake with %s: %w", addr, proxy.describe(err))
		default:
			return nil, unreachable("ssh handshake with %s: %w", addr, err)
		}
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

// isAuthError recognises x/crypto's authentication failures, which have no
// type of their own, and servers disconnecting after too many attempts.
func isAuthError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "unable to authenticate") || strings.Contains(s, "authentication")
}

// localUser is the user nodeconverge runs as, OpenSSH's default remote user.
func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// Name is the inventory name of the host.
func (c *conn) Name() string { return c.name }

// ExactStdin is true: the bootstrap reads the script with an exact byte
// count (head -c, or dd bs=1) before evaluating it, so the script's own
// reads start where its data does.
func (c *conn) ExactStdin() bool { return true }

// DialSocket opens an OpenSSH direct-streamlocal channel to the unix socket
// at path on the node, on the host's one connection: sshd connects to it as
// the login user (not the become user), so nothing runs or is installed on
// the node for it. An sshd with `AllowStreamLocalForwarding no` (or
// DisableForwarding) refuses the channel; the error says so.
func (c *conn) DialSocket(ctx context.Context, path string) (net.Conn, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%s: socket path %q is not absolute", c.name, path)
	}
	nc, err := c.client.DialContext(ctx, "unix", path)
	if err != nil {
		var oe *ssh.OpenChannelError
		if errors.As(err, &oe) {
			// OpenSSH answers "connect failed" both when its config
			// forbids the stream and when the socket cannot be opened,
			// so the message names every cause.
			return nil, fmt.Errorf("%s: sshd did not open a stream to %s: its sshd_config forbids it (AllowStreamLocalForwarding no, DisableForwarding yes), or the socket is missing or closed to the login user %s: %w", c.name, path, c.loginUser, err)
		}
		return nil, fmt.Errorf("%s: forward %s: %w", c.name, path, err)
	}
	return nc, nil
}

var _ transport.SocketConn = (*conn)(nil)

// Close ends the sessions, the connection and its jump hosts.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
	})
	c.closeClients()
	return c.closeErr
}

// closeClients closes the connection and its jump hosts once; Close, a
// failed Dial and a failed keepalive all get here, and Close reports the
// error.
func (c *conn) closeClients() {
	c.clientsOnce.Do(func() { c.closeErr = c.closeAll() })
}

func (c *conn) closeAll() error {
	var first error
	clients := append([]*ssh.Client{c.client}, reverse(c.jumps)...)
	for _, cl := range clients {
		if cl == nil {
			continue
		}
		// A connection the peer (or a dead jump host) already ended
		// has nothing left to close.
		err := cl.Close()
		if err != nil && first == nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) &&
			!errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
			first = fmt.Errorf("close ssh connection of %s: %w", c.name, err)
		}
	}
	return first
}

func reverse(cs []*ssh.Client) []*ssh.Client {
	out := make([]*ssh.Client, len(cs))
	for i, c := range cs {
		out[len(cs)-1-i] = c
	}
	return out
}

// keepalive closes the connection when the server stops answering, which
// makes pending and later Runs fail as unreachable instead of hanging.
func (c *conn) keepalive() {
	t := time.NewTicker(keepaliveInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			// OpenSSH answers unknown global requests with a
			// failure; any answer proves the peer is alive.
			_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case <-c.stop:
			return
		case err := <-reply:
			if err != nil {
				c.closeClients()
				return
			}
		case <-time.After(keepaliveTimeout):
			c.closeClients()
			return
		}
	}
}

// Run executes script with stdin on the node; see the package comment for
// how script and stdin share the session's input.
func (c *conn) Run(ctx context.Context, script string, stdin []byte) (*transport.CmdResult, error) {
	return c.run(ctx, script, stdin, c.sudoUser)
}

const (
	// startMarker begins the bootstrap's first stderr line, followed by
	// the shell's pid, which is what a cancellation kills.
	startMarker     = "##nodeconverge-shell-started## "
	endMarker       = "# nodeconverge-end-of-script"
	truncatedMarker = "nodeconverge: script arrived truncated"
	// headMarker begins the line a probing bootstrap prints after the
	// start line: "exact" (GNU head stops at the count) or "dd".
	headMarker = "##nodeconverge-head## "
	// cancelGrace bounds the extra session that kills a cancelled
	// command on the node; the caller's context is already done.
	cancelGrace = 5 * time.Second
	// redialGrace bounds the fresh connection that ends a cancelled
	// command when its own connection does not answer.
	redialGrace = 15 * time.Second
)

// bootstrap is the command line of every session. It has no newlines and
// no single quotes inside the sh -c argument, so any login shell (even
// csh) passes it through unchanged.
func bootstrap(reader, sudoUser string) string {
	body := `printf "%s%s\n" "` + startMarker + `" "$$" >&2; ` +
		`__nc_s=$(` + reader + `) || exit 125; ` +
		`case $__nc_s in *"` + endMarker + `") ;; *) echo "` + truncatedMarker + `" >&2; exit 125;; esac; ` +
		`eval "unset __nc_s; $__nc_s"`
	return withSudo("sh -c '"+body+"'", sudoUser)
}

func withSudo(cmd, sudoUser string) string {
	if sudoUser == "" {
		return cmd
	}
	return "sudo -n -u " + shellQuote(sudoUser) + " -- " + cmd
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// stderrBuffer collects a session's stderr and notices the bootstrap's
// start line as soon as it arrives, so a cancellation knows which remote
// process to kill while the command still runs.
type stderrBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	pid int
}

func (b *stderrBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.pid == 0 {
		b.pid, _, _ = findStartLine(b.buf.Bytes())
	}
	return n, err
}

func (b *stderrBuffer) remotePID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pid
}

// findStartLine locates the bootstrap's start line; it returns the pid and
// the line's bounds, or pid 0 when the line is not (yet) complete.
func findStartLine(b []byte) (pid, start, end int) {
	i := bytes.Index(b, []byte(startMarker))
	if i < 0 {
		return 0, 0, 0
	}
	j := bytes.IndexByte(b[i:], '\n')
	if j < 0 {
		return 0, 0, 0
	}
	pid, err := strconv.Atoi(string(b[i+len(startMarker) : i+j]))
	if err != nil || pid <= 0 {
		return 0, 0, 0
	}
	return pid, i, i + j + 1
}

func (c *conn) run(ctx context.Context, script string, stdin []byte, sudoUser string) (*transport.CmdResult, error) {
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("run on %s: %w", c.name, ctx.Err())
	}
	release := func() { <-c.sessions }
	defer func() {
		if release != nil {
			release()
		}
	}()

	payload := script + "\n" + endMarker + "\n"
	reader := "cat"
	if len(stdin) > 0 {
		// Decided on the node by the first session that needs it, and
		// remembered: GNU head stops at the byte count, busybox reads
		// ahead and would swallow the caller's stdin, so it gets the
		// slower exact dd. A separate probe session would cost a round
		// trip per host.
		n := strconv.Itoa(len(payload))
		head, dd := `head -c `+n, `dd bs=1 count=`+n+` 2>/dev/null`
		switch kind := c.headKind.Load(); {
		case c.forceDD || kind == headDD:
			reader = dd
		case kind == headExact:
			reader = head
		default:
			reader = `if [ "$(printf ab | { head -c 1 >/dev/null 2>&1; cat; })" = b ]; then echo "` + headMarker + `exact" >&2; ` + head +
				`; else echo "` + headMarker + `dd" >&2; ` + dd + `; fi`
		}
	}
	sess, err := c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	var stdout bytes.Buffer
	stderr := &stderrBuffer{}
	sess.Stdout = &stdout
	sess.Stderr = stderr
	in, err := sess.StdinPipe()
	if err != nil {
		sess.Close() //nolint:errcheck // unused session; the pipe error is the news
		return nil, fmt.Errorf("run on %s: %w", c.name, err)
	}
	if err := sess.Start(bootstrap(reader, sudoUser)); err != nil {
		sess.Close() //nolint:errcheck // the start error is the news
		return nil, unreachable("run on %s: start session: %w", c.name, err)
	}
	writeErr := make(chan error, 1)
	go func() {
		_, err := in.Write([]byte(payload))
		if err == nil && len(stdin) > 0 {
			_, err = in.Write(stdin)
		}
		if cerr := in.Close(); err == nil {
			err = cerr
		}
		writeErr <- err
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- sess.Wait() }()

	var waitErr error
	select {
	case waitErr = <-waitDone:
	case <-ctx.Done():
		// OpenSSH ignores the "signal" request in common setups and
		// keeps a session open while its processes run, so the
		// command is killed from a second session, and the caller
		// does not wait for the first one to wind down.
		c.killRemote(stderr.remotePID(), sudoUser)
		sess.Close() //nolint:errcheck // best effort; the caller gets ctx.Err()
		rel := release
		release = nil
		go func() {
			<-waitDone
			<-writeErr
			rel()
		}()
		return nil, fmt.Errorf("run on %s: %w", c.name, ctx.Err())
	}
	sess.Close() //nolint:errcheck // the command has ended; Wait reported how
	// A script may exit without reading its stdin, which makes the write
	// fail harmlessly; a script that itself did not arrive whole is
	// reported by the bootstrap, and then the write error says why.
	werr := <-writeErr
	code := 0
	var exitErr *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		code = exitErr.ExitStatus()
		if sig := exitErr.Signal(); sig != "" {
			code = 128 + signalNumber(sig)
		}
	case errors.As(waitErr, &missing):
		return nil, unreachable("run on %s: connection lost before the command finished", c.name)
	default:
		return nil, unreachable("run on %s: %w", c.name, waitErr)
	}
	errBytes := stderr.buf.Bytes()
	res := &transport.CmdResult{Stdout: stdout.Bytes(), ExitCode: code}
	pid, i, j := findStartLine(errBytes)
	if pid == 0 {
		if sudoUser != "" {
			return nil, becomeError(c.name, c.loginUser, sudoUser, code, errBytes)
		}
		return nil, fmt.Errorf("run on %s: remote shell did not start (exit %d): %s", c.name, code, strings.TrimSpace(string(errBytes)))
	}
	j += c.noteHead(errBytes[j:])
	res.Stderr = append(errBytes[:i:i], errBytes[j:]...)
	if code == 125 && bytes.Contains(res.Stderr, []byte(truncatedMarker)) {
		if werr != nil {
			return nil, unreachable("run on %s: script did not arrive whole: %w", c.name, werr)
		}
		return nil, unreachable("run on %s: script did not arrive whole", c.name)
	}
	return res, nil
}

// headKind values.
const (
	headUnknown int32 = iota
	headExact
	headDD
)

// noteHead remembers what a probing bootstrap found the node's head to be,
// from the line it printed right after the start line; it returns that
// line's length (0: the session did not probe).
func (c *conn) noteHead(b []byte) int {
	if !bytes.HasPrefix(b, []byte(headMarker)) {
		return 0
	}
	end := bytes.IndexByte(b, '\n')
	if end < 0 {
		return 0
	}
	switch string(b[len(headMarker):end]) {
	case "exact":
		c.headKind.Store(headExact)
	case "dd":
		c.headKind.Store(headDD)
	default:
		return 0
	}
	return end + 1
}

// killRemote terminates a cancelled command on the node: its whole
// process group, so what the script started dies too. sshd starts every
// session with setsid, so that group belongs to this session alone (led by
// the bootstrap shell, or by the login shell when it did not exec). Best
// effort: the caller's context is done, the command may have finished
// meanwhile, and without a pid there is nothing safe to kill.
func (c *conn) killRemote(pid int, sudoUser string) {
	if pid <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	p := strconv.Itoa(pid)
	script := `pg=$(ps -o pgid= -p ` + p + ` 2>/dev/null | tr -d " "); ` +
		`case $pg in ""|0|1) ;; *) kill -s TERM -- "-$pg" 2>/dev/null;; esac; kill -s TERM ` + p + ` 2>/dev/null; true`
	if _, err := c.runProbe(ctx, script, sudoUser); err == nil || c.redial == nil {
		return // killed, or nothing more to try; the session close follows
	}
	// This connection does not answer: its sshd session may be stopped
	// (SIGSTOP) or hung. A fresh connection gets a fresh sshd session,
	// which can end the command's group; CONT makes stopped processes
	// take their TERM, and lets the old connection's sshd processes (the
	// command's sshd ancestors, short of the listener) notice that the
	// connection is gone and exit.
	rctx, rcancel := context.WithTimeout(context.Background(), redialGrace)
	defer rcancel()
	nc, err := c.redial(rctx)
	if err != nil {
		return // the node is unreachable: there is no way left to reach the command
	}
	defer nc.Close() //nolint:errcheck // a helper connection; nothing was written over it
	script = `l=""; q=$(cut -d" " -f4 /proc/` + p + `/stat 2>/dev/null); ` +
		`while [ -n "$q" ] && [ "$q" -gt 1 ]; do case $(cat /proc/$q/comm 2>/dev/null) in sshd*) l="$l $q";; esac; q=$(cut -d" " -f4 /proc/$q/stat 2>/dev/null); done; ` +
		`s=""; last=""; for x in $l; do [ -n "$last" ] && s="$s $last"; last=$x; done; ` + script + `; ` +
		`case $pg in ""|0|1) ;; *) kill -s CONT -- "-$pg" 2>/dev/null;; esac; kill -s CONT ` + p + ` 2>/dev/null; ` +
		`[ -n "$s" ] && kill -s CONT $s 2>/dev/null; true`
	if _, err := nc.runProbe(rctx, script, sudoUser); err != nil {
		return // best effort, as above
	}
}

// newSession opens a session without letting a dead connection block past
// ctx: the SSH channel open has no context of its own. sshd frees a
// session slot a moment after the previous session's close, so a refused
// open is retried briefly before it counts as an error.
func (c *conn) newSession(ctx context.Context) (*ssh.Session, error) {
	backoff := 5 * time.Millisecond
	deadline := time.Now().Add(sessionRetryWindow)
	for {
		s, err := c.openSession(ctx)
		var oce *ssh.OpenChannelError
		if err == nil || !errors.As(err, &oce) || time.Now().After(deadline) {
			return s, err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, fmt.Errorf("run on %s: %w", c.name, ctx.Err())
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func (c *conn) openSession(ctx context.Context) (*ssh.Session, error) {
	type result struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := c.client.NewSession()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			var oce *ssh.OpenChannelError
			if errors.As(r.err, &oce) {
				return nil, fmt.Errorf("run on %s: open session: %w", c.name, r.err)
			}
			return nil, unreachable("run on %s: open session: %w", c.name, r.err)
		}
		return r.s, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.err == nil {
				r.s.Close() //nolint:errcheck // nobody wants this session any more
			}
		}()
		return nil, fmt.Errorf("run on %s: %w", c.name, ctx.Err())
	}
}

// runProbe runs a short helper script (as the login user, or through sudo
// for killing another user's processes). It does not take a session slot:
// its caller already holds one.
func (c *conn) runProbe(ctx context.Context, script, sudoUser string) (*transport.CmdResult, error) {
	sess, err := c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	var stdout bytes.Buffer
	sess.Stdout = &stdout
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	err = sess.Run(withSudo("sh -c "+shellQuote(script), sudoUser))
	stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var exitErr *ssh.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return nil, unreachable("%w", err)
	}
	return &transport.CmdResult{Stdout: stdout.Bytes()}, nil
}

// signalNumber maps the signal names SSH reports to their usual numbers, so
// a killed command gets the 128+N exit code a shell would show.
func signalNumber(name string) int {
	switch name {
	case "HUP":
		return 1
	case "INT":
		return 2
	case "QUIT":
		return 3
	case "ILL":
		return 4
	case "ABRT":
		return 6
	case "FPE":
		return 8
	case "KILL":
		return 9
	case "USR1":
		return 10
	case "SEGV":
		return 11
	case "USR2":
		return 12
	case "PIPE":
		return 13
	case "ALRM":
		return 14
	case "TERM":
		return 15
	default:
		return 127
	}
}
