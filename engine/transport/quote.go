package transport

import "strings"

// ShellQuote returns s as one word for a POSIX shell: strings made only of
// characters no shell treats specially are returned as they are (so scripts
// stay readable in logs), anything else is single-quoted. The result is
// never empty: an empty argument becomes a pair of single quotes.
//
// A shell word cannot hold a NUL byte; callers that accept arbitrary
// strings reject them first (engine/node's checkNUL).
func ShellQuote(s string) string {
	if s != "" && isShellSafe(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isShellSafe reports whether s needs no quoting. '=' and '~' are left out
// on purpose: a leading word with '=' is an assignment, and '~' expands.
func isShellSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("_./-:,@+%", c) >= 0:
		default:
			return false
		}
	}
	return true
}
