package sshconn

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// testSSHD is a real OpenSSH server on 127.0.0.1 for one test.
type testSSHD struct {
	port     int
	hostKeys map[string]ssh.PublicKey // by key type
	cmd      *exec.Cmd
	exited   chan struct{}
	stderr   *lockedBuffer
}

// addr is the server's address as Dial and known_hosts see it.
func (s *testSSHD) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// knownHostsLine is the known_hosts entry for the server's key of type t.
func (s *testSSHD) knownHostsLine(t string) string {
	return knownhosts.Line([]string{s.addr()}, s.hostKeys[t])
}

// kill stops the server and every session process it forked. sshd puts
// each connection in a session of its own (setsid), so a process-group kill
// would miss them; the tree is found through /proc before anything dies,
// and only descendants of the server this test started are signalled.
func (s *testSSHD) kill(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
		return
	default:
	}
	pids, err := descendants(s.cmd.Process.Pid)
	if err != nil {
		t.Errorf("list sshd processes: %v", err)
	}
	for _, pid := range append([]int{s.cmd.Process.Pid}, pids...) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill sshd process %d: %v", pid, err)
		}
	}
	<-s.exited
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// The command name may contain spaces and parentheses; the
		// fields after the last ')' are fixed: state, ppid, ...
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		pp, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		children[pp] = append(children[pp], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSSHD starts `/usr/sbin/sshd -D -e` with host keys of the given types
// (ssh-keygen -t names, default ed25519) that accepts the given client keys
// for root. It runs in a private mount namespace with an empty directory
// over /root, so the machine's root .bashrc (pyenv, slow) is not read by
// the login shell, as in the lab design.
func startSSHD(t *testing.T, authorized []ssh.PublicKey, keyTypes ...string) *testSSHD {
	t.Helper()
	if len(keyTypes) == 0 {
		keyTypes = []string{"ed25519"}
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("privilege separation dir: %v", err)
	}
	dir := t.TempDir()
	s := &testSSHD{hostKeys: map[string]ssh.PublicKey{}, exited: make(chan struct{}), stderr: &lockedBuffer{}}
	var cfg strings.Builder
	for _, kt := range keyTypes {
		p := filepath.Join(dir, "host_"+kt)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", kt, "-N", "", "-f", p).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen -t %s: %v: %s", kt, err, out)
		}
		pubText, err := os.ReadFile(p + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(pubText)
		if err != nil {
			t.Fatalf("parse host key: %v", err)
		}
		s.hostKeys[pub.Type()] = pub
		fmt.Fprintf(&cfg, "HostKey %s\n", p)
	}
	var ak bytes.Buffer
	for _, k := range authorized {
		ak.Write(ssh.MarshalAuthorizedKey(k))
	}
	akFile := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(akFile, ak.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// Another process may take the port between freePort and sshd's
	// bind (the machine is shared); a server that could not bind is
	// started again on another port.
	for attempt := 1; ; attempt++ {
		err := s.launch(t, dir, home, cfg.String(), akFile)
		if err == nil {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("sshd on port %d said: %s", s.port, s.stderr.String())
				}
				s.kill(t)
			})
			return s
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatal(err)
		}
	}
}

var errPortTaken = errors.New("port taken")

// launch starts the server on a fresh port and waits until it answers with
// its own host key: a bare TCP connect could reach whoever took the port.
func (s *testSSHD) launch(t *testing.T, dir, home, hostKeyCfg, akFile string) error {
	s.port = freePort(t)
	s.exited = make(chan struct{})
	s.stderr = &lockedBuffer{}
	cfg := hostKeyCfg + fmt.Sprintf(`ListenAddress 127.0.0.1:%d
AuthorizedKeysFile %s
UsePAM no
StrictModes no
PidFile none
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AllowTcpForwarding yes
MaxStartups 100
LogLevel ERROR
`, s.port, akFile)
	cfgFile := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return err
	}
	// unshare execs sh, which execs sshd: the pid stays the server's.
	s.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" /root && exec /usr/sbin/sshd -D -e -f "$2"`, "sh", home, cfgFile)
	s.cmd.Stdout = s.stderr
	s.cmd.Stderr = s.stderr
	// Sessions that outlive a kill would keep the output pipe open;
	// do not let Wait block on them.
	s.cmd.WaitDelay = time.Second
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start sshd: %w", err)
	}
	exited := s.exited
	go func() {
		// The exit status of a killed server is expected to be an
		// error; what matters is that it was reaped.
		if err := s.cmd.Wait(); err != nil {
			s.stderr.Write([]byte("\nsshd exited: " + err.Error() + "\n"))
		}
		close(exited)
	}()

	deadline := time.Now().Add(5 * time.Second)
	for {
		ours, err := s.answersWithOurKey()
		if ours {
			return nil
		}
		select {
		case <-s.exited:
			if strings.Contains(s.stderr.String(), "Address already in use") {
				return fmt.Errorf("sshd on %d: %w", s.port, errPortTaken)
			}
			return fmt.Errorf("sshd exited before listening: %s", s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			s.kill(t)
			return fmt.Errorf("sshd not ready on %s after 5s: %v; stderr: %s", s.addr(), err, s.stderr.String())
		}
		// Pause between attempts; readiness is decided by the
		// server's answer, not by this pause.
		time.Sleep(5 * time.Millisecond)
	}
}

// errOurKey ends a readiness handshake once the host key proved the
// listener is this test's server; authentication is not needed.
var errOurKey = errors.New("host key is ours")

func (s *testSSHD) answersWithOurKey() (bool, error) {
	c, err := net.DialTimeout("tcp", s.addr(), time.Second)
	if err != nil {
		return false, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return false, err
	}
	cfg := &ssh.ClientConfig{
		User: "root",
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			if mine := s.hostKeys[k.Type()]; mine != nil && bytes.Equal(mine.Marshal(), k.Marshal()) {
				return errOurKey
			}
			return fmt.Errorf("foreign host key %s", ssh.FingerprintSHA256(k))
		},
	}
	_, _, _, err = ssh.NewClientConn(c, s.addr(), cfg)
	return errors.Is(err, errOurKey), err
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// clientKey is a fresh ed25519 key written as an OpenSSH private key file.
type clientKey struct {
	path string
	pub  ssh.PublicKey
}

func newClientKey(t *testing.T, dir string) clientKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "nodeconverge-test")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "client_key")
	if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return clientKey{path: p, pub: signer.PublicKey()}
}

// isolate gives the test its own HOME (so ~/.ssh defaults are empty) and
// no ssh-agent, so nothing from the machine's real setup leaks in.
func isolate(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", "")
	return home
}

// writeKnownHosts writes lines to a fresh known_hosts file.
func writeKnownHosts(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
