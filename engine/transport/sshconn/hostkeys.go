package sshconn

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyError is a host key nodeconverge refused: either unknown (not in
// the known_hosts file and recording was not allowed) or changed (the file
// has other keys for the host). It is a failure, never "unreachable": the
// host answered, and connecting anyway would defeat the check.
type HostKeyError struct {
	Host           string // address as known_hosts spells it: host or [host]:port
	Fingerprint    string // SHA256 fingerprint of the key the server offered
	KeyType        string // type of the key the server offered
	Changed        bool   // the file has a different key for this host
	KnownHostsFile string // the file consulted (for Changed, the file of the expected key)
	Line           int    // for Changed, the line of the expected key
}

// Error says what was refused and what the operator can do about it.
func (e *HostKeyError) Error() string {
	if e.Changed {
		return fmt.Sprintf("host key for %s CHANGED (server offered %s %s, expected the key from %s:%d) — refusing; possible man-in-the-middle",
			e.Host, e.KeyType, e.Fingerprint, e.KnownHostsFile, e.Line)
	}
	return fmt.Sprintf("host key for %s is unknown (%s %s); verify it and re-run with --accept-new-host-keys to record it in %s",
		e.Host, e.KeyType, e.Fingerprint, e.KnownHostsFile)
}

// knownHostsMu serialises appends to known_hosts files from concurrent
// Dials in this process, so two hosts accepted at once do not interleave
// their lines and one host is not recorded twice.
var knownHostsMu sync.Mutex

// hostKeys verifies server keys against one known_hosts file.
type hostKeys struct {
	file   string
	accept bool
}

// parsed remembers each known_hosts file's parsed database while the file
// is unchanged (same size and modification time): a run dials every host of
// a fleet with the same file, and parsing it per dial made the controller's
// CPU grow with the square of the fleet.
var parsed = struct {
	sync.Mutex
	m map[string]parsedFile
}{m: map[string]parsedFile{}}

type parsedFile struct {
	size int64
	mod  time.Time
	cb   ssh.HostKeyCallback
}

// load parses the known_hosts file; a missing file is an empty database so
// that accept-new can create it.
func (h *hostKeys) load() (ssh.HostKeyCallback, error) {
	st, err := os.Stat(h.file)
	if errors.Is(err, fs.ErrNotExist) {
		return knownhosts.New()
	}
	if err != nil {
		return nil, fmt.Errorf("read known hosts %s: %w", h.file, err)
	}
	parsed.Lock()
	defer parsed.Unlock()
	if p, ok := parsed.m[h.file]; ok && p.size == st.Size() && p.mod.Equal(st.ModTime()) {
		return p.cb, nil
	}
	cb, err := knownhosts.New(h.file)
	if err != nil {
		return nil, fmt.Errorf("read known hosts %s: %w", h.file, err)
	}
	parsed.m[h.file] = parsedFile{size: st.Size(), mod: st.ModTime(), cb: cb}
	return cb, nil
}

// probeKey is a key no known_hosts file contains. Checking it against the
// database makes knownhosts list every key it has for a host (in
// KeyError.Want), which is the only way the package exposes them.
var probeKey = sync.OnceValues(func() (ssh.PublicKey, error) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate probe key: %w", err)
	}
	return ssh.NewPublicKey(pub)
})

// known returns the keys recorded for hostport.
func (h *hostKeys) known(hostport string) ([]knownhosts.KnownKey, error) {
	cb, err := h.load()
	if err != nil {
		return nil, err
	}
	key, err := probeKey()
	if err != nil {
		return nil, err
	}
	err = cb(hostport, placeholderAddr(hostport), key)
	var ke *knownhosts.KeyError
	if errors.As(err, &ke) {
		return ke.Want, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s in %s: %w", hostport, h.file, err)
	}
	return nil, nil
}

// algorithms orders the host key algorithms so that the types already
// recorded for hostport come first. x/crypto otherwise negotiates its own
// preference (ed25519 first), and a server that has both an ed25519 and a
// recorded ecdsa key would look "changed". The other algorithms stay in the
// list, as in OpenSSH, so a server that really lost the recorded key type is
// reported as changed instead of failing negotiation obscurely.
func (h *hostKeys) algorithms(hostport string) ([]string, error) {
	want, err := h.known(hostport)
	if err != nil {
		return nil, err
	}
	if len(want) == 0 {
		return nil, nil
	}
	var first []string
	for _, k := range want {
		first = append(first, algorithmsForKeyType(k.Key.Type())...)
	}
	rest := ssh.SupportedAlgorithms().HostKeys
	out := make([]string, 0, len(first)+len(rest))
	for _, a := range append(first, rest...) {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// algorithmsForKeyType maps a key type to the signature algorithms that
// prove it; RSA keys sign with SHA-2 (ssh-rsa's SHA-1 is not offered).
func algorithmsForKeyType(t string) []string {
	switch t {
	case ssh.KeyAlgoRSA:
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	case ssh.CertAlgoRSAv01:
		return []string{ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01}
	default:
		return []string{t}
	}
}

// callback verifies the key a server offers for hostport.
func (h *hostKeys) callback() ssh.HostKeyCallback {
	return func(hostport string, remote net.Addr, key ssh.PublicKey) error {
		cb, err := h.load()
		if err != nil {
			return err
		}
		err = cb(hostport, remote, key)
		if err == nil {
			return nil
		}
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			var re *knownhosts.RevokedError
			if errors.As(err, &re) {
				return fmt.Errorf("host key for %s is marked @revoked at %s:%d — refusing", knownhosts.Normalize(hostport), re.Revoked.Filename, re.Revoked.Line)
			}
			return fmt.Errorf("check host key for %s: %w", knownhosts.Normalize(hostport), err)
		}
		if len(ke.Want) > 0 {
			return h.changed(hostport, key, ke.Want)
		}
		if !h.accept {
			return &HostKeyError{
				Host:           knownhosts.Normalize(hostport),
				Fingerprint:    ssh.FingerprintSHA256(key),
				KeyType:        key.Type(),
				KnownHostsFile: h.file,
			}
		}
		return h.record(hostport, remote, key)
	}
}

// changed builds the refusal for a key that differs from the recorded ones,
// pointing at the recorded key of the same type when there is one.
func (h *hostKeys) changed(hostport string, key ssh.PublicKey, want []knownhosts.KnownKey) error {
	exp := want[0]
	for _, k := range want {
		if k.Key.Type() == key.Type() {
			exp = k
			break
		}
	}
	return &HostKeyError{
		Host:           knownhosts.Normalize(hostport),
		Fingerprint:    ssh.FingerprintSHA256(key),
		KeyType:        key.Type(),
		Changed:        true,
		KnownHostsFile: exp.Filename,
		Line:           exp.Line,
	}
}

// record appends key for an unknown host (accept-new). The database is read
// again under the lock: another Dial may have recorded this host meanwhile,
// and a key that differs from that record is still a change to refuse.
func (h *hostKeys) record(hostport string, remote net.Addr, key ssh.PublicKey) error {
	knownHostsMu.Lock()
	defer knownHostsMu.Unlock()
	cb, err := h.load()
	if err != nil {
		return err
	}
	err = cb(hostport, remote, key)
	var ke *knownhosts.KeyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke) && len(ke.Want) > 0:
		return h.changed(hostport, key, ke.Want)
	case !errors.As(err, &ke):
		return fmt.Errorf("check host key for %s: %w", knownhosts.Normalize(hostport), err)
	}
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		return fmt.Errorf("record host key: %w", err)
	}
	prefix, err := needsNewline(h.file)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(h.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("record host key: %w", err)
	}
	line := prefix + knownhosts.Line([]string{hostport}, key) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("record host key in %s: %w", h.file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record host key in %s: %w", h.file, err)
	}
	return nil
}

// needsNewline returns "\n" when file ends without one, so an appended
// entry does not glue itself to a hand-edited last line.
func needsNewline(file string) (string, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read known hosts: %w", err)
	}
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		return "\n", nil
	}
	return "", nil
}

// placeholderAddr satisfies knownhosts' need for a parseable remote address
// when probing; knownhosts prefers the hostname, so its value is unused.
func placeholderAddr(hostport string) net.Addr {
	_, p, err := net.SplitHostPort(hostport)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		port = 22
	}
	return &net.TCPAddr{IP: net.IPv4zero, Port: port}
}
