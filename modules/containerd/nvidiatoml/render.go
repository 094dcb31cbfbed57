package nvidiatoml

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValidateRuntimes checks what Render needs: names that are non-empty and
// unique, a runtime type, valid UTF-8 everywhere, option values TOML can
// hold, and no two option keys (BinaryName included) that are equal without
// regard to case: containerd 2.x matches option keys to the shim's fields
// without regard to case and takes the later one, so BinaryName next to
// binaryName runs whatever binaryName says (issue 10, defect 2).
func ValidateRuntimes(rts []Runtime) error {
	seen := map[string]bool{}
	for i, rt := range rts {
		switch {
		case rt.Name == "":
			return fmt.Errorf("runtime %d: empty name", i)
		case seen[rt.Name]:
			return fmt.Errorf("runtime %q: listed twice", rt.Name)
		case rt.RuntimeType == "":
			return fmt.Errorf("runtime %q: empty runtime_type", rt.Name)
		}
		seen[rt.Name] = true
		for _, s := range []string{rt.Name, rt.RuntimeType, rt.BinaryName} {
			if !utf8.ValidString(s) {
				return fmt.Errorf("runtime %q: invalid UTF-8 in %q", rt.Name, s)
			}
		}
		for k, v := range rt.Options {
			if k == "" || !utf8.ValidString(k) {
				return fmt.Errorf("runtime %q: invalid option name %q", rt.Name, k)
			}
			if strings.EqualFold(k, "BinaryName") && rt.BinaryName != "" {
				return fmt.Errorf("runtime %q: BinaryName given both as field and as option %s", rt.Name, k)
			}
			for k2 := range rt.Options {
				if k2 < k && strings.EqualFold(k, k2) {
					return fmt.Errorf("runtime %q: options %s and %s are the same key to containerd 2.x, which ignores case", rt.Name, k2, k)
				}
			}
			if _, err := encodeValue(v); err != nil {
				return fmt.Errorf("runtime %q: option %s: %w", rt.Name, k, err)
			}
		}
	}
	return nil
}

// Render returns exactly one set of runtime tables for l, ready to insert:
// for each runtime `[PREFIX.NAME]` with runtime_type, then, if it has any,
// `[PREFIX.NAME.options]` with BinaryName and the options sorted by key.
// Runtimes are separated by one blank line and every line ends with
// newline. The output depends only on the arguments. rts should pass
// ValidateRuntimes; an option value TOML cannot hold is rendered as the
// string fmt.Sprint gives for it, so Render itself cannot fail.
func Render(l Layout, rts []Runtime, newline string) []byte {
	prefix := l.RuntimesPrefix()
	var b strings.Builder
	for i, rt := range rts {
		if i > 0 {
			b.WriteString(newline)
		}
		table := prefix + "." + formatKey(rt.Name)
		b.WriteString("[" + table + "]" + newline)
		if rt.RuntimeType != "" {
			b.WriteString("  runtime_type = " + quote(rt.RuntimeType) + newline)
		}
		for _, k := range sortedKeys(rt.Fields) {
			if k == "runtime_type" || k == "options" {
				continue
			}
			v, err := encodeValue(rt.Fields[k])
			if err != nil {
				v = quote(fmt.Sprint(rt.Fields[k]))
			}
			b.WriteString("  " + formatKey(k) + " = " + v + newline)
		}
		opts := make(map[string]any, len(rt.Options)+1)
		for k, v := range rt.Options {
			opts[k] = v
		}
		if rt.BinaryName != "" {
			opts["BinaryName"] = rt.BinaryName
		}
		if len(opts) == 0 {
			continue
		}
		b.WriteString(newline + "[" + table + ".options]" + newline)
		for _, k := range sortedKeys(opts) {
			v, err := encodeValue(opts[k])
			if err != nil {
				v = quote(fmt.Sprint(opts[k]))
			}
			b.WriteString("  " + formatKey(k) + " = " + v + newline)
		}
	}
	return []byte(b.String())
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// formatPath writes a dotted key, quoting the parts that are not bare.
func formatPath(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = formatKey(p)
	}
	return strings.Join(parts, ".")
}

// formatKey writes k bare when TOML allows it, else as a basic string.
func formatKey(k string) string {
	if k == "" {
		return `""`
	}
	for i := 0; i < len(k); i++ {
		if !isBare(k[i]) {
			return quote(k)
		}
	}
	return k
}

// quote writes s as a TOML basic string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// encodeValue writes v as a TOML value on one line.
func encodeValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		if !utf8.ValidString(v) {
			return "", errors.New("invalid UTF-8 in string")
		}
		return quote(v), nil
	case bool:
		return strconv.FormatBool(v), nil
	case int:
		return strconv.FormatInt(int64(v), 10), nil
	case int8:
		return strconv.FormatInt(int64(v), 10), nil
	case int16:
		return strconv.FormatInt(int64(v), 10), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint8:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint16:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint32:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint:
		return encodeUint(uint64(v))
	case uint64:
		return encodeUint(v)
	case float32:
		return encodeFloat(float64(v), 32), nil
	case float64:
		return encodeFloat(v, 64), nil
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			e, err := encodeValue(s)
			if err != nil {
				return "", err
			}
			parts[i] = e
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			e, err := encodeValue(x)
			if err != nil {
				return "", fmt.Errorf("element %d: %w", i, err)
			}
			parts[i] = e
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case map[string]any:
		parts := make([]string, 0, len(v))
		for _, k := range sortedKeys(v) {
			if !utf8.ValidString(k) {
				return "", fmt.Errorf("invalid UTF-8 in key %q", k)
			}
			e, err := encodeValue(v[k])
			if err != nil {
				return "", fmt.Errorf("key %s: %w", k, err)
			}
			parts = append(parts, formatKey(k)+" = "+e)
		}
		if len(parts) == 0 {
			return "{}", nil
		}
		return "{ " + strings.Join(parts, ", ") + " }", nil
	}
	return "", fmt.Errorf("unsupported value type %T", v)
}

func encodeUint(v uint64) (string, error) {
	if v > math.MaxInt64 {
		return "", fmt.Errorf("integer %d overflows TOML's int64", v)
	}
	return strconv.FormatUint(v, 10), nil
}

func encodeFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, bits)
	if !strings.ContainsAny(s, ".en") {
		s += ".0"
	}
	return s
}
