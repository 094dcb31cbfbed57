package vault

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func secrets(t *testing.T) []Secret {
	t.Helper()
	s, err := ReadPasswordFile(context.Background(), "testdata/password.txt")
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Password) != "test-vault-password" {
		t.Fatalf("password = %q", s.Password)
	}
	return []Secret{s}
}

// The envelopes were written by the real ansible-vault (ansible-core 2.14)
// with testdata/password.txt.
func TestDecryptAnsibleVaultFiles(t *testing.T) {
	plain, err := os.ReadFile("testdata/plain.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ file, want, id string }{
		{"v11.yml", string(plain), ""},
		{"v12.yml", string(plain), "prod"},
		{"v11_short.txt", "a", ""},
		{"v11_block.txt", "0123456789abcdef", ""},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if !IsEncrypted(data) {
			t.Errorf("%s: IsEncrypted = false", tt.file)
		}
		e, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if e.ID != tt.id {
			t.Errorf("%s: id %q, want %q", tt.file, e.ID, tt.id)
		}
		got, err := Decrypt(data, secrets(t))
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if string(got) != tt.want {
			t.Errorf("%s: got %q, want %q", tt.file, got, tt.want)
		}
	}
}

func TestDecryptInline(t *testing.T) {
	b, err := os.ReadFile("testdata/inline.yml")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(b), "|\n")
	got, err := Decrypt([]byte(body), secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "inline-secret-value" {
		t.Errorf("got %q", got)
	}
}

func TestDecryptErrors(t *testing.T) {
	data, err := os.ReadFile("testdata/v11.yml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decrypt(data, nil); !errors.Is(err, ErrNoPassword) {
		t.Errorf("no password: %v", err)
	}
	wrong := []Secret{{Source: "x", Password: []byte("nope")}}
	if _, err := Decrypt(data, wrong); !errors.Is(err, ErrWrongPassword) {
		t.Errorf("wrong password: %v", err)
	}
	// Every password is tried, as Ansible does.
	if _, err := Decrypt(data, append(wrong, secrets(t)...)); err != nil {
		t.Errorf("second password: %v", err)
	}
	// A flipped ciphertext byte fails the HMAC, never decrypts to junk.
	// (Any error would not do: a CTR plaintext with a flipped last byte
	// usually fails its padding check too, HMAC or not.)
	s := string(data)
	i := strings.LastIndexAny(s, "0123456789abcdef")
	flip := "0"
	if s[i] == '0' {
		flip = "1"
	}
	if _, err := Decrypt([]byte(s[:i]+flip+s[i+1:]), secrets(t)); !errors.Is(err, ErrWrongPassword) {
		t.Errorf("tampered envelope: %v, want the HMAC mismatch", err)
	}
	for _, bad := range []string{
		"$ANSIBLE_VAULT;1.1;AES256\nzz\n",
		"$ANSIBLE_VAULT;1.0;AES\n00\n",
		"$ANSIBLE_VAULT;1.1;AES128\n00\n",
		"$ANSIBLE_VAULT\n",
		"$ANSIBLE_VAULT;1.1;AES256\n6161\n",
		"plain text",
	} {
		if _, err := Decrypt([]byte(bad), secrets(t)); err == nil {
			t.Errorf("Decrypt(%q): want error", bad)
		}
	}
}

func TestPasswordScript(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "pw.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho test-vault-password\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := ReadPasswordFile(context.Background(), script)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Password) != "test-vault-password" {
		t.Errorf("script password %q", s.Password)
	}
	fail := filepath.Join(dir, "fail.sh")
	if err := os.WriteFile(fail, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPasswordFile(context.Background(), fail); err == nil || !strings.Contains(err.Error(), "fail.sh") {
		t.Errorf("failing script: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPasswordFile(context.Background(), empty); err == nil {
		t.Error("empty password accepted")
	}
}

func TestPasswordFilesEnv(t *testing.T) {
	t.Setenv("ANSIBLE_VAULT_PASSWORD_FILE", "testdata/password.txt")
	s, err := PasswordFiles(context.Background(), nil)
	if err != nil || len(s) != 1 {
		t.Fatalf("PasswordFiles: %v %v", s, err)
	}
	s, err = PasswordFiles(context.Background(), []string{"testdata/password.txt"})
	if err != nil || len(s) != 1 {
		t.Fatalf("PasswordFiles listed twice: %d %v", len(s), err)
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/v11.yml", "testdata/v12.yml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Decrypt(data, []Secret{{Password: []byte("x")}})
	})
}
