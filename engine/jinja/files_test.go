package jinja

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileLookups: lookup('file'), lookup('template') and first_found
// find their files on the search path the renderer gives, in the kind's
// subdirectory first, as Ansible's do; a missing file is an error that
// says where it looked, unless first_found's skip says otherwise.
func TestFileLookups(t *testing.T) {
	role, play := t.TempDir(), t.TempDir()
	for p, c := range map[string]string{
		filepath.Join(role, "files", "key.pub"):           "ssh-ed25519 AAAA\n\n",
		filepath.Join(play, "files", "only-here.txt"):     "play\n",
		filepath.Join(role, "templates", "motd.j2"):       "hello {{ who }}\n",
		filepath.Join(role, "vars", "Debian.yml"):         "x: 1\n",
		filepath.Join(play, "vars", "default.yml"):        "x: 2\n",
		filepath.Join(play, "extra", "from-paths.yml"):    "x: 3\n",
		filepath.Join(role, "templates", "a.conf.j2"):     "a\n",
		filepath.Join(role, "files", "not-a-template.j2"): "f\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]any{SearchPathVar: []any{role, play}, ActionVar: "copy", "who": "node1", "distro": "Debian"}
	eval := func(src string, extra map[string]any) (any, error) {
		e, err := ParseExpr(src)
		if err != nil {
			return nil, err
		}
		v := map[string]any{}
		for k, x := range vars {
			v[k] = x
		}
		for k, x := range extra {
			v[k] = x
		}
		return e.Eval(v)
	}
	for _, c := range []struct {
		src   string
		extra map[string]any
		want  string
	}{
		{"lookup('file', 'key.pub')", nil, "ssh-ed25519 AAAA"},
		{"lookup('file', 'only-here.txt')", nil, "play"},
		{"lookup('template', 'motd.j2')", nil, "hello node1\n"},
		{"lookup('first_found', [distro ~ '.yml', 'default.yml'])", map[string]any{ActionVar: "include_vars"}, filepath.Join(role, "vars", "Debian.yml")},
		{"lookup('first_found', ['Other.yml', 'default.yml'])", map[string]any{ActionVar: "include_vars"}, filepath.Join(play, "vars", "default.yml")},
		{"lookup('first_found', files=['from-paths.yml'], paths=['extra'])", nil, filepath.Join(play, "extra", "from-paths.yml")},
		{"lookup('first_found', ['a.conf.j2'])", map[string]any{ActionVar: "template"}, filepath.Join(role, "templates", "a.conf.j2")},
		{"query('first_found', {'files': ['none.yml'], 'skip': true}) | length", nil, "0"},
	} {
		v, err := eval(c.src, c.extra)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if got := Text(v); got != c.want {
			t.Errorf("%s = %q, want %q", c.src, got, c.want)
		}
	}
	for _, src := range []string{"lookup('file', 'missing.txt')", "lookup('first_found', ['none.yml'])"} {
		if _, err := eval(src, nil); err == nil || !strings.Contains(err.Error(), "looked in") {
			t.Errorf("%s: %v, want an error saying where it looked", src, err)
		}
	}
}
