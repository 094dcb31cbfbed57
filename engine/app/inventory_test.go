package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"nodeconverge/engine/redact"
)

const vaultDir = "../inventory/testdata/vault/"

func TestListInventorySourcesAndVault(t *testing.T) {
	t.Setenv("ANSIBLE_VAULT_PASSWORD_FILE", "")
	var out bytes.Buffer
	err := ListInventory(context.Background(), []string{vaultDir + "inventory.yml", "../inventory/testdata/multi/b/hosts"},
		[]string{vaultDir + "password.txt"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	hv := got["_meta"].(map[string]any)["hostvars"].(map[string]any)
	if _, ok := hv["g3"]; !ok {
		t.Errorf("the second -i was not read: %v", hv)
	}
	if strings.Contains(out.String(), "registry-pass-0042") {
		t.Error("an inline vaulted value is printed decrypted")
	}
	if !strings.Contains(out.String(), "__ansible_vault") {
		t.Error("an inline vaulted value is not printed as its envelope")
	}
}

func TestVaultPasswordMissing(t *testing.T) {
	t.Setenv("ANSIBLE_VAULT_PASSWORD_FILE", "")
	err := ListInventory(context.Background(), []string{vaultDir + "inventory.yml"}, nil, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "inventory.yml:5:24: vaulted value: no vault password given (--vault-password-file") {
		t.Errorf("want the located no-password error, got %v", err)
	}
	t.Setenv("ANSIBLE_VAULT_PASSWORD_FILE", vaultDir+"password.txt")
	if err := ListInventory(context.Background(), []string{vaultDir + "inventory.yml"}, nil, &bytes.Buffer{}); err != nil {
		t.Errorf("ANSIBLE_VAULT_PASSWORD_FILE: %v", err)
	}
}

// TestVaultValuesMasked: a decrypted value is masked in every view
// whatever its variable is called (dcgm_token is not a credential name
// redact knows, plain_in_vault neither).
func TestVaultValuesMasked(t *testing.T) {
	t.Setenv("ANSIBLE_VAULT_PASSWORD_FILE", "")
	f := Fleet{Inventories: []string{vaultDir + "inventory.yml"}, VaultPasswordFiles: []string{vaultDir + "password.txt"}}
	inv, err := f.LoadInventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	maskSecretVars(inv, nil)
	for _, s := range []string{"dcgm-token-xyz", "visible-after-decrypt", "nested-token-value", "host-level-secret-1"} {
		if got := redact.Values("echo " + s); strings.Contains(got, s) {
			t.Errorf("%q is not masked: %s", s, got)
		}
	}
}
