package app

import (
	"strings"
	"testing"

	"nodeconverge/engine/inventory"
)

// TestConnection: Ansible's names for SSH and local map onto the two
// transports, --host-root and -c win over the host's ansible_connection,
// and a plugin nodeconverge does not have is refused by name before any
// host is dialed.
func TestConnection(t *testing.T) {
	host := func(c string) *inventory.Host {
		return &inventory.Host{Name: "n1", Conn: inventory.ConnInfo{Connection: c}}
	}
	for _, tt := range []struct {
		f    Fleet
		conn string
		want string // "" = refused
	}{
		{Fleet{}, "", "ssh"},
		{Fleet{}, "smart", "ssh"},
		{Fleet{}, "ansible.builtin.ssh", "ssh"},
		{Fleet{}, "local", "local"},
		{Fleet{}, "docker", ""},
		{Fleet{Connection: "local"}, "ssh", "local"},
		{Fleet{Connection: "ssh"}, "local", "ssh"},
		{Fleet{HostRoot: "/host"}, "ssh", "local"},
	} {
		got, err := tt.f.connection(host(tt.conn))
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), `ansible_connection "docker"`) {
				t.Errorf("%+v %q: got %q, err %v; want a refusal naming it", tt.f, tt.conn, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%+v %q: got %q, err %v; want %s", tt.f, tt.conn, got, err, tt.want)
		}
	}
	if err := (Fleet{Connection: "winrm"}).checkConnection(); err == nil {
		t.Error("-c winrm was accepted")
	}
	if err := (Fleet{Connection: "local"}).checkConnection(); err != nil {
		t.Errorf("-c local: %v", err)
	}
}
