package nvidiatoml

import (
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// TestSetKey: each way a key can be placed, the result parses to the value
// asked for, and every byte outside the edit is kept.
func TestSetKey(t *testing.T) {
	cri := []string{"plugins", "io.containerd.grpc.v1.cri"}
	reg := append(append([]string(nil), cri...), "registry", "config_path")
	opt := append(append([]string(nil), cri...), "containerd", "runtimes", "runc", "options", "SystemdCgroup")
	for _, c := range []struct {
		name, src string
		path      []string
		value     any
		fold      bool
		want      string
	}{
		{"replace in place, comment above kept", "# keep\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/old\" # old\n  x = 1\n", reg, "/etc/containerd/certs.d", false,
			"# keep\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n  x = 1\n"},
		{"insert after the table's last key with its indent", "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n    x = 1\n# next\n\n[b]\n", reg, "/c", false,
			"[plugins.\"io.containerd.grpc.v1.cri\".registry]\n    x = 1\n    config_path = \"/c\"\n# next\n\n[b]\n"},
		{"insert under a header without keys", "[plugins.\"io.containerd.grpc.v1.cri\".registry]", reg, "/c", false,
			"[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/c\"\n"},
		{"append a table", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"p\"", reg, "/c", false,
			"version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"p\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/c\"\n"},
		{"dotted assignment stays dotted", "[plugins.\"io.containerd.grpc.v1.cri\"]\n  registry.config_path = \"/old\"\r\n", reg, "/c", false,
			"[plugins.\"io.containerd.grpc.v1.cri\"]\n  registry.config_path = \"/c\"\r\n"},
		{"fold: one spelling left", "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  systemdCgroup = false\n  BinaryName = \"/r\"\n  SYSTEMDCGROUP = false\n", opt, true, true,
			"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n  BinaryName = \"/r\"\n"},
		{"no fold: other spellings are other keys", "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  systemdCgroup = false\n", opt, true, false,
			"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  systemdCgroup = false\n  SystemdCgroup = true\n"},
		{"array of tables are not the table", "[[plugins.\"io.containerd.grpc.v1.cri\".registry]]\n  config_path = \"/old\"\n", reg, "/c", false,
			"[[plugins.\"io.containerd.grpc.v1.cri\".registry]]\n  config_path = \"/old\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/c\"\n"},
	} {
		got, err := SetKey([]byte(c.src), c.path, c.value, c.fold)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
	// Idempotent: setting the value a file already has changes nothing.
	src := "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/c\"\n"
	got, err := SetKey([]byte(src), reg, "/c", false)
	if err != nil || string(got) != src {
		t.Errorf("same value: %q %v", got, err)
	}
	var m map[string]any
	if err := toml.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	if _, err := SetKey([]byte("[a]\n  b = \"\"\"open\n"), []string{"a", "b"}, "x", false); err == nil {
		t.Error("an unterminated value must not be rewritten")
	}
}
