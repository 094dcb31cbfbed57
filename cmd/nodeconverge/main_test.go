package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestInventoryFlags: -i is repeatable and --vault-password-file opens
// the vault.
func TestInventoryFlags(t *testing.T) {
	t.Setenv("ANSIBLE_VAULT_PASSWORD_FILE", "")
	const d = "../../engine/inventory/testdata/"
	c := root()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetArgs([]string{"inventory", "-i", d + "vault/inventory.yml", "-i", d + "multi/b/hosts",
		"--vault-password-file", d + "vault/password.txt", "--list"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"gpu1"`, `"g3"`, `__ansible_vault`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %s", want)
		}
	}
}
