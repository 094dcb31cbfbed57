package sshconn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSSHConfigLookup(t *testing.T) {
	home := isolate(t)
	dir := filepath.Join(home, ".ssh")
	writeFile(t, filepath.Join(dir, "conf.d", "a.conf"), "Host inc-*\n  User from-include\n")
	writeFile(t, filepath.Join(dir, "config"), `
# comments and blank lines are ignored
Include conf.d/*.conf

Host web-* !web-secret
  HostName %h.example.net
  User=web
  Port 2200
  IdentityFile ~/.ssh/web_%r_%p
  IdentityFile "/keys/with space"

Host web-secret
  ProxyJump bastion,root@10.0.0.1:2222

Match exec "false"
  User never

Host *
  User fallback
  Port 22
  IdentityFile %d/.ssh/any
`)
	cfg, err := loadSSHConfig(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host string
		want hostConfig
	}{
		{"web-1", hostConfig{
			HostName:      "web-1.example.net",
			User:          "web",
			Port:          "2200",
			IdentityFiles: []string{"~/.ssh/web_%r_%p", "/keys/with space", "%d/.ssh/any"},
		}},
		{"WEB-2", hostConfig{ // host names match case-insensitively
			HostName:      "WEB-2.example.net",
			User:          "web",
			Port:          "2200",
			IdentityFiles: []string{"~/.ssh/web_%r_%p", "/keys/with space", "%d/.ssh/any"},
		}},
		{"web-secret", hostConfig{ // negated in the first block
			User:          "fallback",
			Port:          "22",
			ProxyJump:     "bastion,root@10.0.0.1:2222",
			IdentityFiles: []string{"%d/.ssh/any"},
		}},
		{"inc-1", hostConfig{User: "from-include", Port: "22", IdentityFiles: []string{"%d/.ssh/any"}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, cfg.lookup(tt.host)); diff != "" {
			t.Errorf("lookup(%q) (-want +got):\n%s", tt.host, diff)
		}
	}
	if got, want := expandTokens("~/.ssh/web_%r_%p%%", "h", "alice", "2200", "me"), filepath.Join(home, ".ssh", "web_alice_2200%"); got != want {
		t.Errorf("expandTokens = %q, want %q", got, want)
	}
	if got, want := expandTokens("%d/k_%u_%h", "h", "r", "22", "me"), home+"/k_me_h"; got != want {
		t.Errorf("expandTokens = %q, want %q", got, want)
	}
}

func TestSSHConfigMissingAndBroken(t *testing.T) {
	dir := t.TempDir()
	cfg, err := loadSSHConfig(filepath.Join(dir, "nope"))
	if err != nil {
		t.Fatalf("missing config must be empty, got %v", err)
	}
	if got := cfg.lookup("x"); got.HostName != "" || got.User != "" {
		t.Errorf("empty config resolved %+v", got)
	}
	p := filepath.Join(dir, "config")
	if err := os.WriteFile(p, []byte("Host a\n  User \"unterminated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSSHConfig(p); err == nil || !strings.Contains(err.Error(), p+":2") {
		t.Errorf("want an error naming %s:2, got %v", p, err)
	}
	loop := filepath.Join(dir, "loop")
	if err := os.WriteFile(loop, []byte("Include "+loop+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSSHConfig(loop); err == nil {
		t.Error("an Include loop must fail, not recurse forever")
	}
}

func TestParseHop(t *testing.T) {
	tests := []struct {
		in               string
		user, host, port string
		bad              bool
	}{
		{in: "bastion", host: "bastion"},
		{in: "ops@bastion", user: "ops", host: "bastion"},
		{in: "ops@10.0.0.1:2222", user: "ops", host: "10.0.0.1", port: "2222"},
		{in: "ssh://ops@[fe80::1]:22", user: "ops", host: "fe80::1", port: "22"},
		{in: "[fe80::1]", host: "fe80::1"},
		{in: "host:notaport", bad: true},
		{in: "", bad: true},
	}
	for _, tt := range tests {
		u, h, p, err := parseHop(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("parseHop(%q) accepted", tt.in)
			}
			continue
		}
		if err != nil || u != tt.user || h != tt.host || p != tt.port {
			t.Errorf("parseHop(%q) = %q %q %q %v, want %q %q %q", tt.in, u, h, p, err, tt.user, tt.host, tt.port)
		}
	}
}

// TestSSHConfigProxyCommand: ProxyCommand keeps its value as written
// (quotes included, for the shell), records where it was set, and
// excludes ProxyJump: the first of the two obtained wins, as in OpenSSH.
func TestSSHConfigProxyCommand(t *testing.T) {
	home := isolate(t)
	p := filepath.Join(home, ".ssh", "config")
	writeFile(t, p, "Host a\n  ProxyCommand sh -c \"nc %h %p\"  # not a comment to ssh\nHost b\n  ProxyJump j\nHost *\n  ProxyJump k\n  ProxyCommand=ssh -W %h:%p x\n")
	cfg, err := loadSSHConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.lookup("a")
	if got.ProxyCommand != `sh -c "nc %h %p"  # not a comment to ssh` || got.ProxyCommandAt != p+":2" || got.ProxyJump != "" {
		t.Errorf("a: %+v", got)
	}
	if got := cfg.lookup("b"); got.ProxyJump != "j" || got.ProxyCommand != "" {
		t.Errorf("b: %+v", got)
	}
	if got := cfg.lookup("c"); got.ProxyJump != "k" || got.ProxyCommand != "" {
		t.Errorf("c: %+v", got)
	}
}
