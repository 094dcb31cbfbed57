package sshconn

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// sshConfig is the part of an OpenSSH client configuration that nodeconverge
// honours. It keeps every block in file order because OpenSSH resolves an
// option by scanning blocks top to bottom and keeping the first value it
// obtains, so order is the whole semantics.
type sshConfig struct {
	blocks []*configBlock
}

// configBlock is one `Host` (or `Match`) section; the implicit section before
// the first `Host` line has match-all patterns.
type configBlock struct {
	patterns []string // nil matches every host
	never    bool     // a Match block we cannot evaluate
	opts     []configOpt
}

type configOpt struct {
	key  string // lower case
	args []string
	raw  string // the value as written, for ProxyCommand (a shell command line)
	file string
	line int
}

// hostConfig is the resolved configuration for one host.
type hostConfig struct {
	HostName      string
	User          string
	Port          string
	IdentityFiles []string
	ProxyJump     string
	// ProxyCommand is the command line whose stdin and stdout carry the
	// connection; ProxyCommandAt says where it was set (file:line).
	ProxyCommand   string
	ProxyCommandAt string
}

// maxIncludeDepth mirrors OpenSSH's READCONF_MAX_DEPTH so an include loop
// ends with an error instead of a stack overflow.
const maxIncludeDepth = 16

// loadSSHConfig reads an OpenSSH client config. A missing file is an empty
// config: most machines running nodeconverge have none.
func loadSSHConfig(file string) (*sshConfig, error) {
	c := &sshConfig{blocks: []*configBlock{{}}}
	if err := c.readFile(file, filepath.Dir(file), 0); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &sshConfig{}, nil
		}
		return nil, err
	}
	return c, nil
}

func (c *sshConfig) readFile(file, sshDir string, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("ssh config %s: includes nested deeper than %d", file, maxIncludeDepth)
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("read ssh config: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		key, args, err := splitConfigLine(sc.Text())
		if err != nil {
			return fmt.Errorf("%s:%d: %w", file, lineNo, err)
		}
		if key == "" {
			continue
		}
		switch key {
		case "host":
			if len(args) == 0 {
				return fmt.Errorf("%s:%d: Host needs at least one pattern", file, lineNo)
			}
			c.blocks = append(c.blocks, &configBlock{patterns: args})
		case "match":
			// Match criteria (exec, canonical, localuser...) need
			// OpenSSH's own evaluation; only `Match all` is
			// unambiguous, every other Match block is skipped.
			all := len(args) == 1 && strings.EqualFold(args[0], "all")
			c.blocks = append(c.blocks, &configBlock{never: !all})
		case "include":
			// An Include inside a Host block is conditional on that
			// block, which falls out naturally: lines of the included
			// file land in the current block until it says Host.
			for _, pat := range args {
				if err := c.include(pat, sshDir, depth); err != nil {
					return fmt.Errorf("%s:%d: %w", file, lineNo, err)
				}
			}
		default:
			cur := c.blocks[len(c.blocks)-1]
			cur.opts = append(cur.opts, configOpt{key: key, args: args, raw: rawValue(sc.Text()), file: file, line: lineNo})
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	return nil
}

func (c *sshConfig) include(pattern, sshDir string, depth int) error {
	p := expandTilde(pattern)
	if !filepath.IsAbs(p) {
		p = filepath.Join(sshDir, p)
	}
	matches, err := filepath.Glob(p)
	if err != nil {
		return fmt.Errorf("include %s: %w", pattern, err)
	}
	sort.Strings(matches)
	for _, m := range matches {
		if err := c.readFile(m, sshDir, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// splitConfigLine splits `Key value...` or `Key=value` into a lower-case key
// and its arguments, honouring double quotes. Blank and comment lines give
// an empty key.
func splitConfigLine(line string) (string, []string, error) {
	s := strings.TrimSpace(line)
	if s == "" || s[0] == '#' {
		return "", nil, nil
	}
	end := strings.IndexAny(s, " \t=")
	if end < 0 {
		return strings.ToLower(s), nil, nil
	}
	key := strings.ToLower(s[:end])
	rest := strings.TrimLeft(s[end:], " \t")
	if strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	var args []string
	for rest != "" {
		if rest[0] == '#' {
			break
		}
		if rest[0] == '"' {
			close := strings.IndexByte(rest[1:], '"')
			if close < 0 {
				return "", nil, fmt.Errorf("unterminated quote in %q", line)
			}
			args = append(args, rest[1:close+1])
			rest = strings.TrimLeft(rest[close+2:], " \t")
			continue
		}
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		args = append(args, rest[:end])
		rest = strings.TrimLeft(rest[end:], " \t")
	}
	return key, args, nil
}

// rawValue is what follows the key (and its separator) on a config line,
// unsplit and with its quotes: OpenSSH hands ProxyCommand's value to the
// shell as written.
func rawValue(line string) string {
	s := strings.TrimSpace(line)
	end := strings.IndexAny(s, " \t=")
	if end < 0 {
		return ""
	}
	rest := strings.TrimLeft(s[end:], " \t")
	if strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	return rest
}

// matches reports whether host is selected by a Host line: some positive
// pattern matches and no negated one does, as in OpenSSH's match_hostname.
func (b *configBlock) matches(host string) bool {
	if b.never {
		return false
	}
	if b.patterns == nil {
		return true
	}
	host = strings.ToLower(host)
	matched := false
	for _, p := range b.patterns {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		ok, err := path.Match(strings.ToLower(p), host)
		// path.Match only fails on a malformed pattern ('[' unclosed);
		// OpenSSH has no character classes, so treat it as literal.
		if err != nil {
			ok = strings.EqualFold(p, host)
		}
		if !ok {
			continue
		}
		if neg {
			return false
		}
		matched = true
	}
	return matched
}

// lookup resolves the options for host. The first value obtained for an
// option wins, except IdentityFile, which accumulates like in OpenSSH.
func (c *sshConfig) lookup(host string) hostConfig {
	var hc hostConfig
	for _, b := range c.blocks {
		if !b.matches(host) {
			continue
		}
		for _, o := range b.opts {
			if len(o.args) == 0 {
				continue
			}
			v := o.args[0]
			switch o.key {
			case "hostname":
				if hc.HostName == "" {
					hc.HostName = strings.ReplaceAll(v, "%h", host)
				}
			case "user":
				if hc.User == "" {
					hc.User = v
				}
			case "port":
				if hc.Port == "" {
					hc.Port = v
				}
			case "identityfile":
				hc.IdentityFiles = append(hc.IdentityFiles, v)
			case "proxyjump":
				// ProxyJump and ProxyCommand exclude each
				// other; as in OpenSSH, the first one
				// obtained wins.
				if hc.ProxyJump == "" && hc.ProxyCommand == "" {
					hc.ProxyJump = strings.Join(o.args, ",")
				}
			case "proxycommand":
				if hc.ProxyJump == "" && hc.ProxyCommand == "" {
					hc.ProxyCommand = o.raw
					hc.ProxyCommandAt = fmt.Sprintf("%s:%d", o.file, o.line)
				}
			}
		}
	}
	return hc
}

// expandTokens replaces the OpenSSH percent tokens nodeconverge knows in an
// IdentityFile path, then a leading ~.
func expandTokens(s, host, remoteUser, port, localUser string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case 'h':
			b.WriteString(host)
		case 'r':
			b.WriteString(remoteUser)
		case 'p':
			b.WriteString(port)
		case 'u':
			b.WriteString(localUser)
		case 'd':
			b.WriteString(homeDir())
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return expandTilde(b.String())
}

// expandTilde expands a leading ~ or ~/ to the home directory.
func expandTilde(p string) string {
	if p == "~" {
		return homeDir()
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(homeDir(), p[2:])
	}
	return p
}

// homeDir is the local user's home; $HOME wins so tests and sudo'd runs
// find the keys the caller means.
func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return "/"
}
