package ctrconf

import (
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func TestRegistryConflict(t *testing.T) {
	for _, c := range []struct {
		name, dump, want string
	}{
		{"1.x both", `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["https://mirror.lab"]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."a.lab"]
`, `plugins."io.containerd.grpc.v1.cri".registry.config_path = "/etc/containerd/certs.d" and plugins."io.containerd.grpc.v1.cri".registry.mirrors."a.lab" would both be set`},
		{"2.x both", `[plugins."io.containerd.cri.v1.images".registry]
  config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.cri.v1.images".registry.mirrors."docker.io"]
    endpoint = ["https://mirror.lab"]
`, `plugins."io.containerd.cri.v1.images".registry.mirrors."docker.io" would both be set`},
		{"config_path only", `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors]
`, ""},
		{"1.x tls", `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".registry.configs."h.lab".auth]
    username = "u"
  [plugins."io.containerd.grpc.v1.cri".registry.configs."b.lab".tls]
    insecure_skip_verify = false
`, `registry.configs."b.lab".tls would both be set`},
		{"auth only", `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".registry.configs."h.lab".auth]
    username = "u"
`, ""},
		{"mirrors only", `[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["https://mirror.lab"]
`, ""},
		{"empty config_path", `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = ""
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["https://mirror.lab"]
`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &Effective{OK: true}
			if err := toml.Unmarshal([]byte(c.dump), &e.Values); err != nil {
				t.Fatal(err)
			}
			got := RegistryConflict(e)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("got %q, want one containing %q", got, c.want)
			}
		})
	}
	if got := RegistryConflict(&Effective{OK: false}); got != "" {
		t.Errorf("a failed dump: %q", got)
	}
}
