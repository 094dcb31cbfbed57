package inventory

import (
	"regexp"
	"strings"
)

// The regexes of Ansible's parsing/utils/addresses.py, which decide
// whether a pattern is one host address (so its colons are not
// separators).
const (
	numericRange  = `\[(?:[0-9]+:[0-9]+)(?::[0-9]+)?\]`
	hexRange      = `\[(?:[0-9a-f]+:[0-9a-f]+)(?::[0-9]+)?\]`
	alnumRange    = `\[(?:[a-z]:[a-z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]`
	ipv6Component = `(?:[0-9a-f]{1,4}|` + hexRange + `)`
	ipv4Component = `(?:[01]?[0-9]{1,2}|2[0-4][0-9]|25[0-5]|` + numericRange + `)`
	// Python's label also refuses a label ending in _ or -, which RE2
	// cannot say (a lookbehind); isAddress checks it after the match.
	label = `(?:[\p{L}\p{N}_]|` + alnumRange + `)(?:[\p{L}\p{N}_-]|` + alnumRange + `)*`
)

var (
	bracketedHostPort = regexp.MustCompile(`^\[(.+)\]:([0-9]+)$`)
	hostPort          = regexp.MustCompile(`^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$`)
	ipv4Re            = regexp.MustCompile(`(?i)^(?:` + ipv4Component + `\.){3}` + ipv4Component + `$`)
	// The IPv6 alternatives are written with C for a component.
	ipv6Re = regexp.MustCompile(`(?i)^(?:` + strings.ReplaceAll(strings.Join([]string{
		`(?:C:){7}C`,
		`(?:C:){1,6}:`,
		`(?:C:)(?::C){1,6}`,
		`(?:C:){2}(?::C){1,5}`,
		`(?:C:){3}(?::C){1,4}`,
		`(?:C:){4}(?::C){1,3}`,
		`(?:C:){5}(?::C){1,2}`,
		`(?:C:){6}(?::C)`,
		`:(?::C){1,6}`,
		`C?::`,
		`(?:0:){6}(?:C\.){3}C`,
		`::(?:ffff:)?(?:C\.){3}C`,
		`(?:0:){5}ffff:(?:C\.){3}C`,
	}, "|"), "C", ipv6Component) + `)$`)
	hostnameRe = regexp.MustCompile(`(?i)^` + label + `(?:\.` + label + `)*$`)
)

// isAddress reports whether s parses as Ansible's parse_address(s,
// allow_ranges=True) does: a host name, IPv4 or IPv6 address, ranges
// allowed, with an optional :port (bracketed for IPv6).
func isAddress(s string) bool {
	addr := s
	if m := bracketedHostPort.FindStringSubmatch(addr); m != nil {
		addr = m[1]
	}
	if m := hostPort.FindStringSubmatch(addr); m != nil {
		addr = m[1]
	}
	if ipv4Re.MatchString(addr) || ipv6Re.MatchString(addr) {
		return true
	}
	if !hostnameRe.MatchString(addr) {
		return false
	}
	// No label may end in "_" or "-".
	for _, l := range strings.Split(addr, ".") {
		if strings.HasSuffix(l, "_") || strings.HasSuffix(l, "-") {
			return false
		}
	}
	return true
}
