package sshconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
)

// fixture is one sshd with a client key it trusts and a known_hosts file
// that already trusts it.
type fixture struct {
	srv  *testSSHD
	key  clientKey
	kh   string
	opts Options
}

func newFixture(t *testing.T, keyTypes ...string) *fixture {
	t.Helper()
	home := isolate(t)
	key := newClientKey(t, home)
	srv := startSSHD(t, []ssh.PublicKey{key.pub}, keyTypes...)
	kh := writeKnownHosts(t, srv.knownHostsLine(ssh.KeyAlgoED25519))
	opts := NewOptions()
	opts.KnownHostsFile = kh
	opts.ConnectTimeout = 5 * time.Second
	return &fixture{srv: srv, key: key, kh: kh, opts: opts}
}

func (f *fixture) target() Target {
	return Target{Name: "node1", Address: "127.0.0.1", Port: f.srv.port, User: "root", KeyFile: f.key.path}
}

func dial(t *testing.T, opts Options, tg Target) transport.Conn {
	t.Helper()
	c, err := Dial(context.Background(), opts, tg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func run(t *testing.T, c transport.Conn, script string, stdin []byte) *transport.CmdResult {
	t.Helper()
	res, err := c.Run(context.Background(), script, stdin)
	if err != nil {
		t.Fatalf("Run(%q): %v", script, err)
	}
	return res
}

func TestRunOutputsAndExitCode(t *testing.T) {
	f := newFixture(t)
	c := dial(t, f.opts, f.target())
	if c.Name() != "node1" {
		t.Errorf("Name() = %q, want node1", c.Name())
	}

	res := run(t, c, "echo out; echo err >&2; exit 3", nil)
	if got := string(res.Stdout); got != "out\n" {
		t.Errorf("stdout = %q, want %q", got, "out\n")
	}
	if got := string(res.Stderr); got != "err\n" {
		t.Errorf("stderr = %q, want %q (start marker must be stripped)", got, "err\n")
	}
	if res.ExitCode != 3 || res.OK() {
		t.Errorf("exit code = %d, want 3", res.ExitCode)
	}

	// The first command reads stdin: it must get the caller's bytes, not
	// the rest of the script, and the later commands must still run.
	res = run(t, c, "read x\necho \"got $x\"\necho second", []byte("line1\nline2\n"))
	if got, want := string(res.Stdout), "got line1\nsecond\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}

	// Without stdin the script sees end of input, not its own text.
	res = run(t, c, "cat; echo end", nil)
	if got, want := string(res.Stdout), "end\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}

	// The script runs as a whole in sh, with the user the target named.
	res = run(t, c, "set -eu\nf() { id -un; }\nf\nfalse\necho unreachable", nil)
	if string(res.Stdout) != "root\n" || res.ExitCode != 1 {
		t.Errorf("set -e script: stdout %q exit %d, want root and exit 1", res.Stdout, res.ExitCode)
	}
}

func TestBinaryStdinRoundTrip(t *testing.T) {
	f := newFixture(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := bytes.Repeat(all, 1024) // 256 KiB, several SSH window updates
	for _, exact := range []bool{true, false} {
		t.Run(fmt.Sprintf("exactHead=%v", exact), func(t *testing.T) {
			c := dial(t, f.opts, f.target())
			got := run(t, c, "cat", all)
			if !bytes.Equal(got.Stdout, all) {
				t.Fatalf("round trip of all byte values differs: got %d bytes %x", len(got.Stdout), got.Stdout)
			}
			ic := c.(*conn)
			// Force the portable dd reader to prove it is exact too.
			ic.forceDD = !exact
			got = run(t, c, "cat", all)
			if !bytes.Equal(got.Stdout, all) {
				t.Fatalf("round trip with exactHead=%v differs", exact)
			}
			if exact {
				got = run(t, c, "cat", big)
				if !bytes.Equal(got.Stdout, big) {
					t.Fatalf("256 KiB round trip differs (%d bytes back)", len(got.Stdout))
				}
			}
		})
	}
}

func TestUnreadStdinIsNotAnError(t *testing.T) {
	f := newFixture(t)
	c := dial(t, f.opts, f.target())
	res := run(t, c, "echo done; exit 0", bytes.Repeat([]byte("x"), 1<<20))
	if string(res.Stdout) != "done\n" || res.ExitCode != 0 {
		t.Errorf("got stdout %q exit %d", res.Stdout, res.ExitCode)
	}
}

func TestConcurrentSessions(t *testing.T) {
	f := newFixture(t)
	c := dial(t, f.opts, f.target())
	const n = 20 // more than maxSessions and than OpenSSH's MaxSessions
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			in := []byte(strconv.Itoa(i))
			res, err := c.Run(context.Background(), `printf '%s-' "$(cat)"; echo "$0"`, in)
			if err != nil {
				errs <- fmt.Errorf("run %d: %w", i, err)
				return
			}
			if want := strconv.Itoa(i) + "-sh\n"; string(res.Stdout) != want {
				errs <- fmt.Errorf("run %d: stdout %q, want %q", i, res.Stdout, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestUnknownHostKeyRefused(t *testing.T) {
	f := newFixture(t)
	opts := f.opts
	opts.KnownHostsFile = filepath.Join(t.TempDir(), "sub", "known_hosts")
	_, err := Dial(context.Background(), opts, f.target())
	var hke *HostKeyError
	if !errors.As(err, &hke) {
		t.Fatalf("Dial error = %v, want a HostKeyError", err)
	}
	want := ssh.FingerprintSHA256(f.srv.hostKeys[ssh.KeyAlgoED25519])
	if hke.Changed || hke.Fingerprint != want || hke.KeyType != ssh.KeyAlgoED25519 {
		t.Errorf("HostKeyError = %+v, want unknown ed25519 key %s", hke, want)
	}
	if IsUnreachable(err) {
		t.Errorf("a host key refusal must not count as unreachable: %v", err)
	}
	for _, s := range []string{"is unknown", want, "--accept-new-host-keys", opts.KnownHostsFile, "[127.0.0.1]:" + strconv.Itoa(f.srv.port)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if _, err := os.Stat(opts.KnownHostsFile); !os.IsNotExist(err) {
		t.Errorf("refusal must not create the known_hosts file (stat: %v)", err)
	}
}

func TestAcceptNewRecordsThenTrusts(t *testing.T) {
	f := newFixture(t)
	opts := f.opts
	opts.KnownHostsFile = filepath.Join(t.TempDir(), "new", "known_hosts")
	opts.AcceptNewHostKeys = true
	c := dial(t, opts, f.target())
	if res := run(t, c, "echo hi", nil); string(res.Stdout) != "hi\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	b, err := os.ReadFile(opts.KnownHostsFile)
	if err != nil {
		t.Fatalf("known_hosts not written: %v", err)
	}
	if want := f.srv.knownHostsLine(ssh.KeyAlgoED25519) + "\n"; string(b) != want {
		t.Errorf("known_hosts = %q, want %q", b, want)
	}
	st, err := os.Stat(opts.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("known_hosts mode %v, want 0600", st.Mode().Perm())
	}

	// Second connection: recorded key, accept-new off, no new line.
	opts.AcceptNewHostKeys = false
	dial(t, opts, f.target())
	b2, err := os.ReadFile(opts.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Errorf("known_hosts changed on the second Dial: %q", b2)
	}
}

func TestChangedHostKeyRefusedEvenWithAcceptNew(t *testing.T) {
	f := newFixture(t)
	other := newClientKey(t, t.TempDir()) // any ed25519 key that is not the server's
	kh := writeKnownHosts(t, "# comment", knownhosts.Line([]string{f.srv.addr()}, other.pub))
	before, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	opts := f.opts
	opts.KnownHostsFile = kh
	opts.AcceptNewHostKeys = true
	_, err = Dial(context.Background(), opts, f.target())
	var hke *HostKeyError
	if !errors.As(err, &hke) || !hke.Changed {
		t.Fatalf("Dial error = %v, want a changed HostKeyError", err)
	}
	if hke.KnownHostsFile != kh || hke.Line != 2 {
		t.Errorf("expected key located at %s:%d, want %s:2", hke.KnownHostsFile, hke.Line, kh)
	}
	if hke.Fingerprint != ssh.FingerprintSHA256(f.srv.hostKeys[ssh.KeyAlgoED25519]) {
		t.Errorf("fingerprint %s is not the server's", hke.Fingerprint)
	}
	for _, s := range []string{"CHANGED", "man-in-the-middle", fmt.Sprintf("%s:2", kh)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	after, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("known_hosts modified after a refusal: %q", after)
	}
	if IsUnreachable(err) {
		t.Error("changed host key reported as unreachable")
	}
}

// The server has ed25519 and ecdsa keys; only ecdsa is recorded, hashed.
// x/crypto alone would negotiate ed25519 and call the host changed.
func TestRecordedKeyTypeIsNegotiated(t *testing.T) {
	f := newFixture(t, "ed25519", "ecdsa")
	ecdsa := f.srv.hostKeys[ssh.KeyAlgoECDSA256]
	if ecdsa == nil {
		t.Fatalf("server has no ecdsa-sha2-nistp256 key: %v", f.srv.hostKeys)
	}
	hashed := knownhosts.HashHostname(knownhosts.Normalize(f.srv.addr())) + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ecdsa)))
	opts := f.opts
	opts.KnownHostsFile = writeKnownHosts(t, hashed)
	c := dial(t, opts, f.target())
	if res := run(t, c, "echo ok", nil); string(res.Stdout) != "ok\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestSSHConfigAliasAndDefaults(t *testing.T) {
	f := newFixture(t)
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, fmt.Sprintf(`# first obtained value wins
Host mynode
  HostName 127.0.0.1
  Port %d
  User root
  IdentityFile %s

Host *
  User nobody
  Port 1
`, f.srv.port, f.key.path))
	opts := f.opts
	opts.SSHConfigFile = cfg
	c := dial(t, opts, Target{Name: "mynode"})
	res := run(t, c, `id -un; echo "$SSH_CONNECTION"`, nil)
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) != 2 || lines[0] != "root" || !strings.HasSuffix(lines[1], " "+strconv.Itoa(f.srv.port)) {
		t.Errorf("got %q, want root on port %d", res.Stdout, f.srv.port)
	}

	// Explicit target fields win over ssh config: a wrong port in the
	// target must be used (and fail) even though the config has the
	// right one.
	closed := freePort(t)
	_, err := Dial(context.Background(), opts, Target{Name: "mynode", Port: closed})
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(closed)) {
		t.Errorf("explicit port not honoured: %v", err)
	}
}

func TestDefaultKeyAndAgent(t *testing.T) {
	f := newFixture(t)
	home := os.Getenv("HOME")
	// A default key in ~/.ssh is found without being named.
	writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), string(readFile(t, f.key.path)))
	tg := f.target()
	tg.KeyFile = ""
	dial(t, f.opts, tg)

	// Without any key file, the real ssh-agent provides the key.
	if err := os.Remove(filepath.Join(home, ".ssh", "id_ed25519")); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	agentCmd := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agentCmd.Start(); err != nil {
		t.Fatalf("start ssh-agent: %v", err)
	}
	t.Cleanup(func() {
		if err := agentCmd.Process.Kill(); err != nil {
			t.Errorf("kill ssh-agent: %v", err)
		}
		// Killed on purpose, so Wait's error is the expected signal.
		if err := agentCmd.Wait(); err == nil {
			t.Error("ssh-agent exited cleanly before being killed")
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		add := exec.Command("ssh-add", f.key.path)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		out, err := add.CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssh-add: %v: %s", err, out)
		}
		time.Sleep(10 * time.Millisecond) // poll until the agent listens
	}
	t.Setenv("SSH_AUTH_SOCK", sock)
	c := dial(t, f.opts, tg)
	if res := run(t, c, "echo agent", nil); string(res.Stdout) != "agent\n" {
		t.Errorf("stdout %q", res.Stdout)
	}

	// UseAgent off and no keys: an authentication failure that says what
	// was offered, and not "unreachable".
	opts := f.opts
	opts.UseAgent = false
	_, err := Dial(context.Background(), opts, tg)
	if err == nil || !strings.Contains(err.Error(), "authenticate root@") || !strings.Contains(err.Error(), "no keys to offer") {
		t.Errorf("want an authentication error naming the missing keys, got %v", err)
	}
	if IsUnreachable(err) {
		t.Errorf("auth failure reported as unreachable: %v", err)
	}
}

func TestWrongKeyIsAuthFailure(t *testing.T) {
	f := newFixture(t)
	stranger := newClientKey(t, t.TempDir())
	tg := f.target()
	tg.KeyFile = stranger.path
	_, err := Dial(context.Background(), f.opts, tg)
	if err == nil || !strings.Contains(err.Error(), ssh.FingerprintSHA256(stranger.pub)) {
		t.Fatalf("want an auth error listing the offered key's fingerprint, got %v", err)
	}
	if IsUnreachable(err) {
		t.Errorf("auth failure reported as unreachable: %v", err)
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("error leaks key material: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	isolate(t)
	opts := NewOptions()
	opts.KnownHostsFile = filepath.Join(t.TempDir(), "known_hosts")
	port := freePort(t)
	_, err := Dial(context.Background(), opts, Target{Name: "gone", Address: "127.0.0.1", Port: port, User: "root"})
	if !IsUnreachable(err) {
		t.Fatalf("closed port: IsUnreachable(%v) = false", err)
	}
	if !strings.HasPrefix(err.Error(), "gone: ") {
		t.Errorf("error should name the host first: %v", err)
	}
	if IsUnreachable(errors.New("x")) || IsUnreachable(nil) {
		t.Error("IsUnreachable true for unrelated errors")
	}
}

func TestConnectionLostIsUnreachable(t *testing.T) {
	f := newFixture(t)
	c := dial(t, f.opts, f.target())
	run(t, c, "true", nil)
	f.srv.kill(t)
	_, err := c.Run(context.Background(), "true", nil)
	if !IsUnreachable(err) {
		t.Fatalf("Run after the server died: IsUnreachable(%v) = false", err)
	}
}

func TestProxyJump(t *testing.T) {
	f := newFixture(t)
	bastion := startSSHD(t, []ssh.PublicKey{f.key.pub})
	opts := f.opts
	opts.KnownHostsFile = writeKnownHosts(t,
		f.srv.knownHostsLine(ssh.KeyAlgoED25519),
		bastion.knownHostsLine(ssh.KeyAlgoED25519))
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, fmt.Sprintf("Host bastion\n  HostName 127.0.0.1\n  Port %d\n  User root\n  IdentityFile %s\n", bastion.port, f.key.path))
	opts.SSHConfigFile = cfg

	for _, jump := range []string{"bastion", fmt.Sprintf("root@127.0.0.1:%d", bastion.port)} {
		t.Run(jump, func(t *testing.T) {
			tg := f.target()
			tg.ProxyJump = jump
			c := dial(t, opts, tg)
			if res := run(t, c, "echo via", nil); string(res.Stdout) != "via\n" {
				t.Errorf("stdout %q", res.Stdout)
			}
			if n := len(c.(*conn).jumps); n != 1 {
				t.Errorf("%d jump connections, want 1", n)
			}
		})
	}

	// The jump host's key is verified too.
	bad := opts
	bad.KnownHostsFile = writeKnownHosts(t, f.srv.knownHostsLine(ssh.KeyAlgoED25519))
	tg := f.target()
	tg.ProxyJump = "bastion"
	_, err := Dial(context.Background(), bad, tg)
	var hke *HostKeyError
	if !errors.As(err, &hke) || hke.Host != "[127.0.0.1]:"+strconv.Itoa(bastion.port) {
		t.Fatalf("unknown bastion key: got %v", err)
	}

	// The target really is reached through the bastion: once the bastion
	// is gone, the connection to the target is lost.
	c := dial(t, opts, tg)
	run(t, c, "true", nil)
	bastion.kill(t)
	if _, err := c.Run(context.Background(), "true", nil); !IsUnreachable(err) {
		t.Fatalf("Run after the bastion died: want unreachable, got %v", err)
	}
}

func TestBecome(t *testing.T) {
	f := newFixture(t)
	tg := f.target()
	tg.Become = true // to root, which the login user already is
	c := dial(t, f.opts, tg)
	if u := c.(*conn).sudoUser; u != "" {
		t.Errorf("already root: sudo should be skipped, got sudo user %q", u)
	}
	if res := run(t, c, "id -un", nil); string(res.Stdout) != "root\n" {
		t.Errorf("id -un = %q", res.Stdout)
	}

	// To another user, through the real sudo -n; stdin and exit codes
	// still pass through.
	tg.BecomeUser = "nobody"
	c = dial(t, f.opts, tg)
	res := run(t, c, `id -un; cat; exit 4`, []byte("in\x00put"))
	if string(res.Stdout) != "nobody\nin\x00put" || res.ExitCode != 4 {
		t.Errorf("become nobody: stdout %q exit %d", res.Stdout, res.ExitCode)
	}

	// A sudo that refuses to start the shell is an error, not a result.
	tg.BecomeUser = "no-such-user-nodeconverge"
	c = dial(t, f.opts, tg)
	_, err := c.Run(context.Background(), "true", nil)
	if err == nil || !strings.Contains(err.Error(), "become: sudo -n -u no-such-user-nodeconverge on node1 failed") {
		t.Errorf("unknown become user: got %v", err)
	}
}

// A non-root login with a password-protected sudo needs a second account
// with a login shell, which this shared machine should not grow. The real
// sudo's refusal is produced by running it as nobody, and the message
// built from it is checked.
func TestSudoPasswordMessage(t *testing.T) {
	out, err := exec.Command("runuser", "-u", "nobody", "--", "sudo", "-n", "-u", "root", "--", "true").CombinedOutput()
	if err == nil {
		t.Fatalf("sudo -n as nobody succeeded; expected a password demand: %s", out)
	}
	got := becomeError("node1", "deploy", "root", 1, out).Error()
	want := "become: sudo on node1 wants a password; nodeconverge uses sudo -n (configure NOPASSWD for deploy)"
	if got != want {
		t.Errorf("sudo said %q\ngot  %q\nwant %q", out, got, want)
	}
}

func TestRunHonoursContext(t *testing.T) {
	f := newFixture(t)
	c := dial(t, f.opts, f.target())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// A unique duration names the remote process (this "node" is the
	// local machine) without matching anyone else's sleep.
	sleep := fmt.Sprintf("sleep 30.%d", time.Now().UnixNano()%1000000)
	_, err := c.Run(ctx, sleep+"; echo never", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancellation took %v", d)
	}
	if IsUnreachable(err) {
		t.Error("cancellation reported as unreachable")
	}
	// The remote command is killed, not left to run out its 30 s.
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := exec.Command("pgrep", "-f", sleep).Output()
		if err != nil { // pgrep exits 1 when nothing matches
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("remote %q still running after cancellation: pids %s", sleep, out)
		}
		time.Sleep(20 * time.Millisecond) // poll the process table
	}
	// The connection survives a cancelled session.
	if res := run(t, c, "echo still", nil); string(res.Stdout) != "still\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

// The bootstrap is plain sh: exercise its truncation guard with the local
// shell, which a healthy SSH connection never triggers.
func TestBootstrapRefusesTruncatedScript(t *testing.T) {
	payload := "echo should-not-run\n" + endMarker + "\n"
	for _, reader := range []string{"cat", "head -c " + strconv.Itoa(len(payload)), "dd bs=1 count=" + strconv.Itoa(len(payload)) + " 2>/dev/null"} {
		cmd := exec.Command("sh", "-c", bootstrap(reader, ""))
		cmd.Stdin = strings.NewReader(payload[:len(payload)-10])
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 125 {
			t.Errorf("%s: err %v, want exit 125", reader, err)
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), truncatedMarker) {
			t.Errorf("%s: stdout %q stderr %q", reader, stdout.String(), stderr.String())
		}
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// plainConn hides the connection's ExactStdin, so a Host sends the filler a
// plain `sh -s` needs.
type plainConn struct{ transport.Conn }

// TestHostDataWithoutFiller: over SSH a Host sends a write's data without the
// 16 KiB of filler (ExactStdin), and the node still gets every byte, as it
// does with the filler.
func TestHostDataWithoutFiller(t *testing.T) {
	f := newFixture(t)
	c := dial(t, f.opts, f.target())
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	content := append([]byte("NCDATA-0\n\n"), all...)
	dir := t.TempDir()
	sent := map[string]int64{}
	for name, conn := range map[string]transport.Conn{"exact": c, "plain": plainConn{c}} {
		h := node.NewHost(conn, node.HostOptions{StateDir: filepath.Join(dir, name+"-state")})
		p := filepath.Join(dir, name)
		if _, err := h.Apply(context.Background(), []transport.Op{{Kind: transport.OpWrite, Path: p, Content: content, Mode: 0o600}}); err != nil {
			t.Fatalf("%s: Apply: %v", name, err)
		}
		sent[name] = h.Stats().BytesSent
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, content) {
			t.Errorf("%s: the node wrote %q, want %q", name, got, content)
		}
	}
	if d := sent["plain"] - sent["exact"]; d < 16*1024 {
		t.Errorf("sent %d bytes with the filler and %d without: the filler (16 KiB) was not dropped", sent["plain"], sent["exact"])
	}
}

// TestHeadProbedOnce: the first session that sends data finds out whether
// the node's head is exact; later sessions use what it found, and neither
// shows the probe's line in the command's stderr.
func TestHeadProbedOnce(t *testing.T) {
	f := newFixture(t)
	c := dial(t, f.opts, f.target()).(*conn)
	if k := c.headKind.Load(); k != headUnknown {
		t.Fatalf("head kind %d before any session", k)
	}
	res := run(t, c, "cat; echo err >&2", []byte("data"))
	if string(res.Stdout) != "data" || string(res.Stderr) != "err\n" {
		t.Errorf("probing session: stdout %q stderr %q, want \"data\" and \"err\\n\"", res.Stdout, res.Stderr)
	}
	if k := c.headKind.Load(); k != headExact {
		t.Fatalf("head kind %d, want exact (%d): this machine's head is GNU's", k, headExact)
	}
	// Had the next session probed again, it would find exact again.
	c.headKind.Store(headDD)
	res = run(t, c, "cat; echo err >&2", []byte("data"))
	if string(res.Stdout) != "data" || string(res.Stderr) != "err\n" {
		t.Errorf("next session: stdout %q stderr %q, want \"data\" and \"err\\n\"", res.Stdout, res.Stderr)
	}
	if k := c.headKind.Load(); k != headDD {
		t.Errorf("the next session probed again (head kind %d)", k)
	}
}
