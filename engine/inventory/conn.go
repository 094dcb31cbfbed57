package inventory

import (
	"fmt"
	"strings"

	"nodeconverge/engine/yamlx"
)

// connInfo derives how to reach a host from its merged vars. The vars were
// type-checked when they were read, so a value that still does not convert
// falls back to the default instead of failing late.
func connInfo(name string, vars map[string]any) ConnInfo {
	c := ConnInfo{Address: name, Port: 22}
	if s := firstString(vars, "ansible_host", "ansible_ssh_host"); s != "" {
		c.Address = s
	}
	for _, k := range []string{"ansible_port", "ansible_ssh_port"} {
		if v, ok := vars[k]; ok {
			if p, err := toPort(v); err == nil {
				c.Port = p
				break
			}
		}
	}
	c.User = firstString(vars, "ansible_user", "ansible_ssh_user")
	c.KeyFile = firstString(vars, "ansible_ssh_private_key_file", "ansible_private_key_file")
	if v, ok := vars["ansible_become"]; ok {
		if b, err := toBool(v); err == nil {
			c.Become = b
		}
	}
	c.BecomeUser = firstString(vars, "ansible_become_user")
	c.CommonArgs = firstString(vars, "ansible_ssh_common_args")
	c.Connection = firstString(vars, "ansible_connection")
	c.ProxyJump = proxyJump(c.CommonArgs)
	return c
}

func firstString(vars map[string]any, keys ...string) string {
	for _, k := range keys {
		if v, ok := vars[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
	}
	return ""
}

// proxyJump finds the jump host in ssh arguments: "-o ProxyJump=x",
// "-oProxyJump=x", "-o ProxyJump x", "-o 'ProxyJump x'", "-J x" and "-Jx".
// The last one given wins, as with ssh's own option parsing of -J.
func proxyJump(args string) string {
	words := yamlx.ShellWords(args)
	jump := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-J" && i+1 < len(words):
			jump = words[i+1]
			i++
		case strings.HasPrefix(w, "-J") && len(w) > 2:
			jump = w[2:]
		case w == "-o" && i+1 < len(words):
			opt := words[i+1]
			i++
			if v, ok := proxyJumpOption(opt); ok {
				jump = v
			} else if strings.EqualFold(opt, "ProxyJump") && i+1 < len(words) {
				jump = words[i+1]
				i++
			}
		case strings.HasPrefix(w, "-o") && len(w) > 2:
			if v, ok := proxyJumpOption(w[2:]); ok {
				jump = v
			}
		}
	}
	return jump
}

// SetsProxyCommand reports whether ssh arguments (ansible_ssh_common_args)
// set ProxyCommand: "-o ProxyCommand=...", "-oProxyCommand ...", or "-o
// 'ProxyCommand ...'". Its value is a shell command line, which nodeconverge
// does not take from inventory variables (they are data); the caller
// refuses the host instead of connecting without the proxy.
func SetsProxyCommand(args string) bool {
	words := yamlx.ShellWords(args)
	for i, w := range words {
		opt := ""
		switch {
		case w == "-o" && i+1 < len(words):
			opt = words[i+1]
		case strings.HasPrefix(w, "-o"):
			opt = w[2:]
		}
		const key = "proxycommand"
		if len(opt) >= len(key) && strings.EqualFold(opt[:len(key)], key) {
			return true
		}
	}
	return false
}

func proxyJumpOption(opt string) (string, bool) {
	const key = "proxyjump"
	if len(opt) <= len(key) || !strings.EqualFold(opt[:len(key)], key) {
		return "", false
	}
	rest := strings.TrimLeft(opt[len(key):], " \t")
	rest = strings.TrimPrefix(rest, "=")
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return "", false
	}
	return rest, true
}
