package sshconn

import (
	"errors"
	"fmt"
	"strings"
)

// unreachableError marks a failure to reach a host or to keep talking to
// it: the network refused, timed out or dropped the connection. It is set
// where the failure happens instead of guessed later from message text.
type unreachableError struct {
	err error
}

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

func unreachable(format string, args ...any) error {
	return &unreachableError{err: fmt.Errorf(format, args...)}
}

// IsUnreachable reports whether err means the host could not be reached or
// the connection broke: TCP connect failures (refused, no route, DNS),
// connect and handshake timeouts, a connection closed during the handshake,
// a jump host that cannot open the tunnel, and a connection lost while a
// command ran. These are the "unreachable" of Ansible's recap.
//
// Host key refusals (HostKeyError) and authentication failures are NOT
// unreachable: the host answered and proved or asked something, and retrying
// the same thing cannot help; they are failures the operator must act on.
// Cancellation by the caller's context is not unreachable either.
func IsUnreachable(err error) bool {
	var u *unreachableError
	return errors.As(err, &u)
}

// sudoPasswordMarkers are what `sudo -n` prints when it would have to ask
// for a password (and older versions' wording when no tty is available).
var sudoPasswordMarkers = []string{
	"a password is required",
	"a terminal is required",
	"no tty present",
}

// becomeError turns the stderr of a `sudo -n` that did not start the shell
// into an error the operator can act on.
func becomeError(host, loginUser, becomeUser string, exitCode int, stderr []byte) error {
	msg := strings.TrimSpace(string(stderr))
	for _, m := range sudoPasswordMarkers {
		if strings.Contains(msg, m) {
			return fmt.Errorf("become: sudo on %s wants a password; nodeconverge uses sudo -n (configure NOPASSWD for %s)", host, loginUser)
		}
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		msg = "no message"
	}
	return fmt.Errorf("become: sudo -n -u %s on %s failed (exit %d): %s", becomeUser, host, exitCode, msg)
}
