package inventory

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/vault"
	"nodeconverge/engine/yamlx"
)

// vaulted is an inline `!vault` value while the inventory loads: the
// plaintext the run uses, and the envelope `ansible-inventory --list`
// prints in its place.
type vaulted struct {
	plain  string
	cipher string
}

// plain is x with a vaulted value replaced by its plaintext (top level
// only; for checks of single values).
func plain(x any) any {
	if v, ok := x.(*vaulted); ok {
		return v.plain
	}
	return x
}

// unvault returns v with every vaulted value replaced by its plaintext,
// copying only the containers that hold one, so vars shared between
// hosts are never changed in place.
func unvault(v any, depth int) any {
	return rewrite(v, depth, func(x *vaulted) any { return x.plain })
}

// listForm returns v as `ansible-inventory --list` prints it: a vaulted
// value as {"__ansible_vault": envelope}.
func listForm(v any, depth int) any {
	return rewrite(v, depth, func(x *vaulted) any { return map[string]any{"__ansible_vault": x.cipher} })
}

func rewrite(v any, depth int, f func(*vaulted) any) any {
	out, _ := rewrite1(v, depth, f)
	return out
}

// rewrite1 also reports whether anything was replaced.
func rewrite1(v any, depth int, f func(*vaulted) any) (any, bool) {
	if depth > 100 {
		return v, false
	}
	switch t := v.(type) {
	case *vaulted:
		return f(t), true
	case map[string]any:
		var out map[string]any
		for k, e := range t {
			n, changed := rewrite1(e, depth+1, f)
			if !changed {
				continue
			}
			if out == nil {
				out = make(map[string]any, len(t))
				for k2, e2 := range t {
					out[k2] = e2
				}
			}
			out[k] = n
		}
		if out == nil {
			return t, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range t {
			n, changed := rewrite1(e, depth+1, f)
			if !changed {
				continue
			}
			if out == nil {
				out = append([]any(nil), t...)
			}
			out[i] = n
		}
		if out == nil {
			return t, false
		}
		return out, true
	}
	return v, false
}

// openVault decrypts a file that is vault-encrypted as a whole, and says
// whether it was; other data is returned as it is.
func (l *loader) openVault(file string, data []byte, what string) ([]byte, bool, error) {
	if !vault.IsEncrypted(data) {
		return data, false, nil
	}
	plain, err := vault.Decrypt(data, l.opts.Vault)
	if err != nil {
		return nil, false, &Error{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("vault-encrypted %s: %v", what, vaultMsg(err))}
	}
	return plain, true, nil
}

func vaultMsg(err error) error {
	if errors.Is(err, vault.ErrWrongPassword) {
		return fmt.Errorf("%w: check --vault-password-file", err)
	}
	return err
}

// decode decodes a YAML value as Ansible's loader (PyYAML, YAML 1.1)
// does, decrypting inline `!vault` values (into *vaulted) and
// registering the secrets it read.
func (l *loader) decode(file string, n *yaml.Node) (any, error) {
	budget := maxDecodeNodes
	v, err := l.decodeNode(file, n, 0, &budget)
	if err != nil {
		return nil, err
	}
	if l.secret {
		l.addSecrets(v, 0)
	}
	return v, nil
}

// maxDecodeNodes bounds the nodes one value expands to, aliases
// included, so an alias bomb is refused instead of filling memory.
const maxDecodeNodes = 1 << 20

func isVaultTag(tag string) bool { return tag == "!vault" || tag == "!vault-encrypted" }

// decodeNode turns a YAML node into plain Go values: plain scalars are
// resolved with YAML 1.1's rules (yaml11), quoted ones are strings,
// explicitly tagged ones as yaml.v3 decodes them.
func (l *loader) decodeNode(file string, n *yaml.Node, depth int, budget *int) (any, error) {
	*budget--
	if depth > 100 || *budget < 0 {
		return nil, nodeErr(file, n, "value nested too deep or too large (aliases included)")
	}
	v := yamlx.Deref(n)
	if v == nil {
		return nil, nil
	}
	switch v.Kind {
	case yaml.ScalarNode:
		switch {
		case isVaultTag(v.Tag):
			p, err := vault.Decrypt([]byte(v.Value), l.opts.Vault)
			if err != nil {
				return nil, nodeErr(file, n, "vaulted value: %v", vaultMsg(err))
			}
			l.sawVault = true
			l.secrets[string(p)] = true
			return &vaulted{plain: string(p), cipher: v.Value}, nil
		case v.Tag == "!unsafe":
			return v.Value, nil
		case v.Style&yaml.TaggedStyle != 0:
			return decodeValue(file, v)
		case v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
			return v.Value, nil
		}
		return yaml11(v.Value), nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(v.Content))
		for _, c := range v.Content {
			x, err := l.decodeNode(file, c, depth+1, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		var merged []map[string]any
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := yamlx.Deref(v.Content[i]), v.Content[i+1]
			if k != nil && k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0 {
				m, err := l.decodeNode(file, val, depth+1, budget)
				if err != nil {
					return nil, err
				}
				switch t := m.(type) {
				case map[string]any:
					merged = append(merged, t)
				case []any:
					for _, e := range t {
						if mm, ok := e.(map[string]any); ok {
							merged = append(merged, mm)
						}
					}
				}
				continue
			}
			key, err := l.decodeNode(file, k, depth+1, budget)
			if err != nil {
				return nil, err
			}
			x, err := l.decodeNode(file, val, depth+1, budget)
			if err != nil {
				return nil, err
			}
			ks, ok := pyJSONKey(key)
			if !ok {
				ks = fmt.Sprint(plain(key))
			}
			out[ks] = x
		}
		// Merged keys come first; the mapping's own keys win.
		if len(merged) > 0 {
			res := map[string]any{}
			for i := len(merged) - 1; i >= 0; i-- {
				for k, x := range merged[i] {
					res[k] = x
				}
			}
			for k, x := range out {
				res[k] = x
			}
			out = res
		}
		return out, nil
	}
	return decodeValue(file, v)
}

// YAML 1.1's implicit types, as PyYAML (and so Ansible) resolves plain
// scalars: yes/no/on/off are booleans, 0644 is octal, 1_000 and 1:30
// (base 60) are integers, a float needs a dot ("1e3" stays text).
var (
	yaml11Bool  = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	yaml11Int   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	yaml11Float = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	yaml11Null  = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
)

// yaml11 resolves a plain scalar as PyYAML's SafeLoader does.
func yaml11(s string) any {
	switch {
	case yaml11Null.MatchString(s):
		return nil
	case yaml11Bool.MatchString(s):
		switch s[0] {
		case 'y', 'Y', 't', 'T':
			return true
		case 'o', 'O':
			return s[1] == 'n' || s[1] == 'N'
		}
		return false
	case yaml11Int.MatchString(s):
		if n, ok := yaml11ParseInt(s); ok {
			return n
		}
	case yaml11Float.MatchString(s):
		return yaml11ParseFloat(s)
	}
	return s
}

func yaml11ParseInt(s string) (int, bool) {
	v := strings.ReplaceAll(s, "_", "")
	sign := 1
	if v != "" && (v[0] == '-' || v[0] == '+') {
		if v[0] == '-' {
			sign = -1
		}
		v = v[1:]
	}
	var n int64
	var err error
	switch {
	case v == "0":
		return 0, true
	case strings.HasPrefix(v, "0b"):
		n, err = strconv.ParseInt(v[2:], 2, 64)
	case strings.HasPrefix(v, "0x"):
		n, err = strconv.ParseInt(v[2:], 16, 64)
	case v[0] == '0':
		n, err = strconv.ParseInt(v, 8, 64)
	case strings.Contains(v, ":"):
		for _, part := range strings.Split(v, ":") {
			d, perr := strconv.ParseInt(part, 10, 64)
			if perr != nil || n > math.MaxInt64/60 {
				return 0, false
			}
			n = n*60 + d
		}
	default:
		n, err = strconv.ParseInt(v, 10, 64)
	}
	if err != nil {
		// Beyond 64 bits: kept as text rather than another number.
		return 0, false
	}
	return sign * int(n), true
}

func yaml11ParseFloat(s string) float64 {
	v := strings.ToLower(strings.ReplaceAll(s, "_", ""))
	sign := 1.0
	if v[0] == '-' || v[0] == '+' {
		if v[0] == '-' {
			sign = -1
		}
		v = v[1:]
	}
	switch {
	case v == ".inf":
		return sign * math.Inf(1)
	case v == ".nan":
		return math.NaN()
	case strings.Contains(v, ":"):
		f := 0.0
		for _, p := range strings.Split(v, ":") {
			x, _ := strconv.ParseFloat(p, 64)
			f = f*60 + x
		}
		return sign * f
	}
	f, _ := strconv.ParseFloat(v, 64)
	return sign * f
}

// addSecrets registers every string in v (read from an encrypted file).
func (l *loader) addSecrets(v any, depth int) {
	if depth > 100 {
		return
	}
	switch t := v.(type) {
	case string:
		l.secrets[t] = true
	case *vaulted:
		l.secrets[t.plain] = true
	case map[string]any:
		for _, e := range t {
			l.addSecrets(e, depth+1)
		}
	case []any:
		for _, e := range t {
			l.addSecrets(e, depth+1)
		}
	}
}
