package inventory

import (
	"errors"
	"fmt"

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

// decode decodes a YAML value, decrypting inline `!vault` values (into
// *vaulted) and registering the secrets it read.
func (l *loader) decode(file string, n *yaml.Node) (any, error) {
	var v any
	var err error
	if hasVault(n, 0, map[*yaml.Node]bool{}) {
		v, err = l.decodeVault(file, n, 0)
	} else {
		v, err = decodeValue(file, n)
	}
	if err != nil {
		return nil, err
	}
	if l.secret {
		l.addSecrets(v, 0)
	}
	return v, nil
}

func isVaultTag(tag string) bool { return tag == "!vault" || tag == "!vault-encrypted" }

func hasVault(n *yaml.Node, depth int, seen map[*yaml.Node]bool) bool {
	if n == nil || depth > 100 || seen[n] {
		return false
	}
	seen[n] = true
	if n.Kind == yaml.AliasNode {
		return hasVault(n.Alias, depth+1, seen)
	}
	if n.Kind == yaml.ScalarNode {
		return isVaultTag(n.Tag)
	}
	for _, c := range n.Content {
		if hasVault(c, depth+1, seen) {
			return true
		}
	}
	return false
}

// decodeVault decodes a value that holds a `!vault` scalar somewhere.
func (l *loader) decodeVault(file string, n *yaml.Node, depth int) (any, error) {
	if depth > 100 {
		return nil, nodeErr(file, n, "value nested too deep")
	}
	v := yamlx.Deref(n)
	if v == nil {
		return nil, nil
	}
	switch v.Kind {
	case yaml.ScalarNode:
		if !isVaultTag(v.Tag) {
			return decodeValue(file, v)
		}
		p, err := vault.Decrypt([]byte(v.Value), l.opts.Vault)
		if err != nil {
			return nil, nodeErr(file, n, "vaulted value: %v", vaultMsg(err))
		}
		l.sawVault = true
		l.secrets[string(p)] = true
		return &vaulted{plain: string(p), cipher: v.Value}, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(v.Content))
		for _, c := range v.Content {
			x, err := l.decodeVault(file, c, depth+1)
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
			if k != nil && k.Kind == yaml.ScalarNode && k.Value == "<<" {
				m, err := l.decodeVault(file, val, depth+1)
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
			key, err := decodeValue(file, k)
			if err != nil {
				return nil, err
			}
			x, err := l.decodeVault(file, val, depth+1)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(key)] = x
		}
		for _, m := range merged {
			for k, x := range m {
				if _, ok := out[k]; !ok {
					out[k] = x
				}
			}
		}
		return out, nil
	}
	return decodeValue(file, v)
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
