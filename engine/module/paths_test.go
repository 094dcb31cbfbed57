package module

import (
	"strings"
	"testing"
)

func TestWritePath(t *testing.T) {
	for _, c := range []struct{ p, err string }{
		{"/etc/containerd/certs.d/harbor.lab/hosts.toml", ""},
		{"/etc/containerd/certs.d/../../../tmp/x/hosts.toml", "its `..` would put the write at /tmp/x/hosts.toml"},
		{"/etc/containerd/..", "would put the write at /etc"},
		{"/etc//containerd/x", "it means /etc/containerd/x"},
		{"/etc/./x", "it means /etc/x"},
		{"/etc/x/", "it means /etc/x"},
		{"etc/x", "not absolute"},
		{"", "not absolute"},
		{"/", "root directory"},
		{"/etc/a\nok: [nuc2]", `path /etc/a\nok: [nuc2] holds a control character`},
		{"/etc/a\x1b[2J", `\x1b[2J`},
		{"/etc/..foo/x", ""},
	} {
		err := WritePath(c.p)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q refused: %v", c.p, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: want an error with %q, got %v", c.p, c.err, err)
		}
	}
	p := &Plan{Files: []FileChange{{Action: Create, Path: "/etc/ok"}, {Action: Move, Path: "/etc/b", From: "/etc/a/../../x"}}}
	if err := CheckPaths(p); err == nil || !strings.Contains(err.Error(), "planned move to /etc/b: source") {
		t.Errorf("CheckPaths = %v", err)
	}
}
