package sshconn

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// keyFile is one private key file to try, and whether its absence is an
// error (named by the caller) or normal (a default or ssh-config guess).
type keyFile struct {
	path     string
	required bool
}

// authSet is the public keys offered to one server, and what was tried, for
// an error message that helps without printing key material.
type authSet struct {
	signers []ssh.Signer
	tried   []string // "path (SHA256:...)" or "agent (N keys)"
	skipped []string // encrypted keys we could not use
	agent   net.Conn
}

// close releases the agent connection.
func (a *authSet) close() {
	if a.agent != nil {
		a.agent.Close()
	}
}

// hint describes the keys for an authentication error.
func (a *authSet) hint() string {
	var parts []string
	if len(a.tried) > 0 {
		parts = append(parts, "offered "+strings.Join(a.tried, ", "))
	} else {
		parts = append(parts, "no keys to offer (no key file found and no ssh-agent)")
	}
	if len(a.skipped) > 0 {
		parts = append(parts, "skipped "+strings.Join(a.skipped, ", "))
	}
	return strings.Join(parts, "; ")
}

// buildAuth loads the key files in order (explicit keys first, then the
// agent, then defaults), skipping duplicates. Encrypted keys cannot be
// unlocked without a prompt, so they are used only through the agent.
func buildAuth(explicit, defaults []keyFile, useAgent bool) (*authSet, error) {
	a := &authSet{}
	seen := map[string]bool{}
	add := func(s ssh.Signer) bool {
		k := string(s.PublicKey().Marshal())
		if seen[k] {
			return false
		}
		seen[k] = true
		a.signers = append(a.signers, s)
		return true
	}
	var agentKeys map[string]bool
	var agentSigners []ssh.Signer
	if sock := os.Getenv("SSH_AUTH_SOCK"); useAgent && sock != "" {
		c, err := net.Dial("unix", sock)
		if err == nil {
			a.agent = c
			ss, err := agent.NewClient(c).Signers()
			if err != nil {
				a.close()
				return nil, fmt.Errorf("list ssh-agent keys from %s: %w", sock, err)
			}
			agentSigners = ss
			agentKeys = map[string]bool{}
			for _, s := range ss {
				agentKeys[string(s.PublicKey().Marshal())] = true
			}
		}
		// An agent socket that no longer answers is common (a stale
		// SSH_AUTH_SOCK from an old login); key files may still work,
		// and the error hint lists what was offered.
	}
	load := func(files []keyFile) error {
		for _, kf := range files {
			b, err := os.ReadFile(kf.path)
			if err != nil {
				if !kf.required && errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return fmt.Errorf("read key %s: %w", kf.path, err)
			}
			s, err := ssh.ParsePrivateKey(b)
			var pm *ssh.PassphraseMissingError
			if errors.As(err, &pm) {
				if pm.PublicKey != nil && agentKeys[string(pm.PublicKey.Marshal())] {
					continue // the agent offers it unlocked
				}
				a.skipped = append(a.skipped, kf.path+" (encrypted; load it into ssh-agent)")
				continue
			}
			if err != nil {
				return fmt.Errorf("parse key %s: %w", kf.path, err)
			}
			if add(s) {
				a.tried = append(a.tried, fmt.Sprintf("%s (%s)", kf.path, ssh.FingerprintSHA256(s.PublicKey())))
			}
		}
		return nil
	}
	if err := load(explicit); err != nil {
		a.close()
		return nil, err
	}
	n := 0
	for _, s := range agentSigners {
		if add(s) {
			n++
		}
	}
	if n > 0 {
		a.tried = append(a.tried, fmt.Sprintf("ssh-agent (%d keys)", n))
	}
	if err := load(defaults); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// keyFiles lists the key files for a host: Target.KeyFile and the ssh
// config's IdentityFile lines are explicit; Options.IdentityFiles and the
// usual ~/.ssh/id_* are defaults, and the ~/.ssh ones are only guessed when
// nothing explicit was configured (as OpenSSH does).
func keyFiles(targetKey string, configKeys []string, extra []string, host, user, port string) (explicit, defaults []keyFile) {
	local := localUser()
	if targetKey != "" {
		explicit = append(explicit, keyFile{path: expandTilde(targetKey), required: true})
	}
	for _, k := range configKeys {
		explicit = append(explicit, keyFile{path: expandTokens(k, host, user, port, local)})
	}
	for _, k := range extra {
		defaults = append(defaults, keyFile{path: expandTilde(k), required: true})
	}
	if len(explicit) == 0 {
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			defaults = append(defaults, keyFile{path: filepath.Join(homeDir(), ".ssh", n)})
		}
	}
	return explicit, defaults
}
