// Package vault decrypts Ansible Vault data: the "$ANSIBLE_VAULT;1.1;AES256"
// and "$ANSIBLE_VAULT;1.2;AES256;<vault id>" envelopes that ansible-vault
// writes, both as whole encrypted files and as inline `!vault |` values.
//
// The format, as Ansible's VaultAES256 implements it: after the header
// line, the hex lines of the envelope decode to three lines, the hex salt,
// the hex HMAC-SHA256 and the hex ciphertext. PBKDF2-HMAC-SHA256 of the
// password and salt (10000 iterations, 80 bytes) gives the AES-256 key, the
// HMAC key and the CTR IV, 32, 32 and 16 bytes. The HMAC covers the
// ciphertext and is checked (in constant time) before anything is
// decrypted; the plaintext is AES-256-CTR with PKCS#7 padding.
//
// Passwords come from password files (--vault-password-file): the file's
// text, or, when the file is executable, what it prints when run, as
// Ansible does.
package vault

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Header starts every vault envelope.
const Header = "$ANSIBLE_VAULT"

// ErrNoPassword is returned by Decrypt when no password was given.
var ErrNoPassword = errors.New("no vault password given (--vault-password-file or ANSIBLE_VAULT_PASSWORD_FILE)")

// ErrWrongPassword is returned by Decrypt when no given password opens the
// envelope (its HMAC does not match under any of them).
var ErrWrongPassword = errors.New("decryption failed: no vault password given matches (HMAC mismatch)")

// Secret is one vault password and where it came from.
type Secret struct {
	// Source names the password's origin (a file), for messages; the
	// password itself is never printed.
	Source   string
	Password []byte
}

// IsEncrypted reports whether data is a vault envelope: it starts with
// the vault header, as Ansible's is_encrypted decides.
func IsEncrypted(data []byte) bool {
	return bytes.HasPrefix(data, []byte(Header))
}

// Envelope is a parsed vault envelope.
type Envelope struct {
	Version string // "1.1" or "1.2"
	Cipher  string // "AES256"
	ID      string // the vault id of a 1.2 envelope, else ""
	salt    []byte
	mac     []byte
	text    []byte
}

// Parse reads a vault envelope without decrypting it.
func Parse(data []byte) (*Envelope, error) {
	data = bytes.TrimLeft(data, " \t\r\n")
	if !IsEncrypted(data) {
		return nil, errors.New("not vault data: it does not start with " + Header)
	}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	head := strings.Split(strings.TrimSpace(lines[0]), ";")
	if len(head) < 3 {
		return nil, fmt.Errorf("vault header %q: want $ANSIBLE_VAULT;VERSION;CIPHER[;ID]", lines[0])
	}
	e := &Envelope{Version: strings.TrimSpace(head[1]), Cipher: strings.TrimSpace(head[2])}
	if len(head) >= 4 {
		e.ID = strings.TrimSpace(head[3])
	}
	switch e.Version {
	case "1.1", "1.2":
	default:
		return nil, fmt.Errorf("vault format version %q is not supported (1.1 and 1.2 are)", e.Version)
	}
	if e.Cipher != "AES256" {
		return nil, fmt.Errorf("vault cipher %q is not supported (AES256 is)", e.Cipher)
	}
	var body strings.Builder
	for _, l := range lines[1:] {
		body.WriteString(strings.TrimSpace(l))
	}
	inner, err := hex.DecodeString(body.String())
	if err != nil {
		return nil, fmt.Errorf("vault body is not hex: %w", err)
	}
	parts := bytes.SplitN(inner, []byte("\n"), 3)
	if len(parts) != 3 {
		return nil, errors.New("vault body: want salt, HMAC and ciphertext lines")
	}
	if e.salt, err = hex.DecodeString(string(parts[0])); err != nil {
		return nil, fmt.Errorf("vault salt is not hex: %w", err)
	}
	if e.mac, err = hex.DecodeString(string(parts[1])); err != nil {
		return nil, fmt.Errorf("vault HMAC is not hex: %w", err)
	}
	if e.text, err = hex.DecodeString(string(bytes.TrimSpace(parts[2]))); err != nil {
		return nil, fmt.Errorf("vault ciphertext is not hex: %w", err)
	}
	if len(e.text) == 0 || len(e.text)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("vault ciphertext of %d bytes is not whole AES blocks", len(e.text))
	}
	return e, nil
}

// Decrypt opens a vault envelope with the first secret whose HMAC
// matches, as Ansible tries every password it was given.
func Decrypt(data []byte, secrets []Secret) ([]byte, error) {
	e, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return e.Decrypt(secrets)
}

// Decrypt opens the envelope with the first secret whose HMAC matches.
func (e *Envelope) Decrypt(secrets []Secret) ([]byte, error) {
	if len(secrets) == 0 {
		return nil, ErrNoPassword
	}
	for _, s := range secrets {
		plain, ok, err := e.open(s.Password)
		if err != nil {
			return nil, err
		}
		if ok {
			return plain, nil
		}
	}
	return nil, ErrWrongPassword
}

// open returns ok=false when the password does not match.
func (e *Envelope) open(password []byte) ([]byte, bool, error) {
	keys, err := pbkdf2.Key(sha256.New, string(password), e.salt, 10000, 80)
	if err != nil {
		return nil, false, fmt.Errorf("derive vault key: %w", err)
	}
	aesKey, macKey, iv := keys[:32], keys[32:64], keys[64:80]
	m := hmac.New(sha256.New, macKey)
	m.Write(e.text)
	if !hmac.Equal(m.Sum(nil), e.mac) {
		return nil, false, nil
	}
	block, err := aes.NewCipher(aesKey)
	if err != nil {
		return nil, false, fmt.Errorf("vault cipher: %w", err)
	}
	plain := make([]byte, len(e.text))
	cipher.NewCTR(block, iv).XORKeyStream(plain, e.text)
	n := int(plain[len(plain)-1])
	if n < 1 || n > aes.BlockSize || n > len(plain) {
		return nil, false, errors.New("vault plaintext has bad padding")
	}
	for _, c := range plain[len(plain)-n:] {
		if int(c) != n {
			return nil, false, errors.New("vault plaintext has bad padding")
		}
	}
	return plain[:len(plain)-n], true, nil
}

// scriptTimeout bounds an executable password file.
const scriptTimeout = 2 * time.Minute

// ReadPasswordFile reads a vault password file as Ansible does: a plain
// file's text with surrounding whitespace removed; an executable file is
// run directly (no shell), its stdin and stderr the terminal's so it may
// prompt, and its standard output, without trailing newlines, is the
// password. An empty password is an error.
func ReadPasswordFile(ctx context.Context, path string) (Secret, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Secret{}, fmt.Errorf("vault password file: %w", err)
	}
	if st.IsDir() {
		return Secret{}, fmt.Errorf("vault password file %s is a directory", path)
	}
	var pw []byte
	if st.Mode()&0o111 != 0 {
		ctx, cancel := context.WithTimeout(ctx, scriptTimeout)
		defer cancel()
		name := path
		if !strings.ContainsRune(path, os.PathSeparator) {
			// exec would search PATH for a bare name; the file meant
			// is the one in the current directory.
			name = "." + string(os.PathSeparator) + path
		}
		cmd := exec.CommandContext(ctx, name)
		cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return Secret{}, fmt.Errorf("vault password script %s: %w (if it is not a script, remove its executable bit)", path, err)
		}
		pw = bytes.TrimRight(out, "\r\n")
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			return Secret{}, fmt.Errorf("vault password file: %w", err)
		}
		pw = bytes.TrimSpace(b)
	}
	if len(pw) == 0 {
		return Secret{}, fmt.Errorf("vault password file %s gives an empty password", path)
	}
	return Secret{Source: path, Password: pw}, nil
}

// PasswordFiles reads the password files given on the command line, then
// ANSIBLE_VAULT_PASSWORD_FILE when it is set and not already listed.
func PasswordFiles(ctx context.Context, files []string) ([]Secret, error) {
	if env := os.Getenv("ANSIBLE_VAULT_PASSWORD_FILE"); env != "" {
		found := false
		for _, f := range files {
			found = found || f == env
		}
		if !found {
			files = append(append([]string(nil), files...), env)
		}
	}
	var out []Secret
	for _, f := range files {
		s, err := ReadPasswordFile(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
