package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/engine/vault"
)

func loadGood(t *testing.T) *Inventory {
	t.Helper()
	inv, err := Load("testdata/good/lab.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return inv
}

func TestLoadStructure(t *testing.T) {
	inv := loadGood(t)
	wantOrder := []string{"bastion", "nuc1", "nuc2", "omen", "omen2", "node01", "node02", "node03", "spare"}
	if diff := cmp.Diff(wantOrder, inv.Order); diff != "" {
		t.Errorf("Order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ungrouped", "gpu", "zone_b", "zone_a", "rack"}, inv.Groups["all"].Children); diff != "" {
		t.Errorf("all children (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"omen2", "nuc2"}, inv.Groups["zone_b"].Hosts); diff != "" {
		t.Errorf("zone_b hosts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"all", "gpu", "nuc", "zone_b"}, inv.Hosts["nuc2"].Groups); diff != "" {
		t.Errorf("nuc2 groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"all", "ungrouped"}, inv.Hosts["bastion"].Groups); diff != "" {
		t.Errorf("bastion groups (-want +got):\n%s", diff)
	}
	// group_vars/gpu/ is a directory: its files merge in name order.
	if got := inv.Groups["gpu"].Vars["containerd_config"]; got != "/etc/containerd/config.toml" {
		t.Errorf("gpu containerd_config = %v", got)
	}
}

func TestVarPrecedence(t *testing.T) {
	inv := loadGood(t)
	tests := []struct {
		host, key string
		want      any
		why       string
	}{
		{"bastion", "level", "all", "only all applies"},
		{"nuc1", "level", "nuc", "child group beats parent group"},
		{"nuc2", "level", "nuc", "deeper group beats a shallower one listed later"},
		{"omen2", "level", "host-inventory", "inventory host var beats group vars"},
		{"omen", "level", "host-file", "host_vars/ beats inventory host vars"},
		{"nuc1", "runtime", "runc", "group_vars/ beats inventory group vars even of a deeper group"},
		{"nuc1", "site", "lab-from-group_vars", "group_vars/all.yml beats inventory all vars"},
		{"nuc2", "zone", "b-from-group_vars", "group_vars/zone_b.yaml applies"},
		{"nuc1", "zone", "a", "inventory var of the only zone group"},
		{"node02", "ansible_port", 2022, "host_vars/ adds vars"},
		{"nuc1", "inventory_hostname", "nuc1", "magic var"},
		{"nuc1", "group_names", []any{"gpu", "nuc", "zone_a"}, "magic var"},
	}
	for _, tt := range tests {
		got := inv.Hosts[tt.host].Vars[tt.key]
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s %s (%s) (-want +got):\n%s", tt.host, tt.key, tt.why, diff)
		}
	}
}

func TestSameDepthLaterNameWins(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "inv.yaml")
	src := "zeta:\n  vars: {v: zeta}\n  hosts: {h: }\nalpha:\n  vars: {v: alpha}\n  hosts: {h: }\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Hosts["h"].Vars["v"]; got != "zeta" {
		t.Errorf("v = %v, want zeta (same depth: the name sorting later wins)", got)
	}
}

func TestConnInfo(t *testing.T) {
	inv := loadGood(t)
	tests := map[string]ConnInfo{
		"bastion": {Address: "127.0.0.9", Port: 22, User: "admin"},
		"nuc2": {Address: "127.0.0.12", Port: 2202, User: "admin", ProxyJump: "jump@bastion:2222",
			CommonArgs: "-o ProxyJump=jump@bastion:2222 -o StrictHostKeyChecking=yes"},
		"omen": {Address: "127.0.0.21", Port: 22, User: "admin", KeyFile: "/keys/omen", Become: true, BecomeUser: "root",
			ProxyJump: "jump@bastion:2222", CommonArgs: "-o ProxyJump=jump@bastion:2222 -o StrictHostKeyChecking=yes"},
		"node01": {Address: "node01", Port: 22, User: "admin", ProxyJump: "ops@jump.example:22", CommonArgs: "-J ops@jump.example:22"},
		"node02": {Address: "node02", Port: 2022, User: "admin", ProxyJump: "ops@other:2200", CommonArgs: "-o 'ProxyJump ops@other:2200'"},
		"spare":  {Address: "spare", Port: 2222, User: "admin"},
	}
	for host, want := range tests {
		if diff := cmp.Diff(want, inv.Hosts[host].Conn); diff != "" {
			t.Errorf("%s Conn (-want +got):\n%s", host, diff)
		}
	}
}

func TestProxyJumpForms(t *testing.T) {
	tests := map[string]string{
		"-o ProxyJump=a@b:1":                  "a@b:1",
		"-oProxyJump=a@b":                     "a@b",
		"-o ProxyJump a@b":                    "a@b",
		`-o "ProxyJump=a@b" -o Foo=bar`:       "a@b",
		"-J a@b:2":                            "a@b:2",
		"-Ja@b":                               "a@b",
		"-o StrictHostKeyChecking=no":         "",
		"":                                    "",
		"-o proxyjump=x -J y":                 "y",
		"-o ProxyCommand='ssh -W %h:%p b' -v": "",
	}
	for args, want := range tests {
		if got := proxyJump(args); got != want {
			t.Errorf("proxyJump(%q) = %q, want %q", args, got, want)
		}
	}
}

// TestMatchesAnsibleInventory compares ListJSON with the real
// ansible-inventory on the same files, precedence included.
func TestMatchesAnsibleInventory(t *testing.T) {
	bin, err := exec.LookPath("ansible-inventory")
	if err != nil {
		t.Fatalf("ansible-inventory is needed for this comparison: %v", err)
	}
	for _, path := range []string{"testdata/good/lab.yaml", "testdata/good/diamond.yaml"} {
		compareWithAnsible(t, bin, path)
	}
}

func compareWithAnsible(t *testing.T, bin, path string) {
	t.Helper()
	cmd := exec.Command(bin, "-i", path, "--list")
	cmd.Env = append(os.Environ(), "ANSIBLE_NOCOLOR=1", "ANSIBLE_LOCALHOST_WARNING=0", "ANSIBLE_INVENTORY_UNPARSED_WARNING=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ansible-inventory: %v", err)
	}
	var want, got any
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	inv, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := inv.ListJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: ListJSON differs from ansible-inventory --list (-ansible +ours):\n%s", path, diff)
	}
}

func TestListJSONNonFinite(t *testing.T) {
	inv, err := load("/nonexistent/inv.yaml", []byte("all:\n  hosts:\n    h: {nan: .nan, inf: [.inf, -.inf]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := inv.ListJSON()
	if err != nil {
		t.Fatalf("ListJSON: %v", err)
	}
	for _, want := range []string{`"nan": "NaN"`, `"Infinity"`, `"-Infinity"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("ListJSON lacks %s:\n%s", want, b)
		}
	}
}

// TestSelect pins a few selections; TestPatternsMatchAnsible compares
// many more with Ansible. Hosts come in Ansible's order: a group's own
// hosts, then its children's level by level.
func TestSelect(t *testing.T) {
	inv := loadGood(t)
	tests := []struct {
		pattern string
		want    string
	}{
		{"all", "bastion omen2 nuc2 nuc1 node01 node02 node03 spare omen"},
		{"*", "bastion omen2 nuc2 nuc1 node01 node02 node03 spare omen"},
		{"omen", "omen"},
		{"gpu", "nuc1 nuc2 omen omen2"},
		{"ungrouped", "bastion"},
		{"zone_b:zone_a", "omen2 nuc2 nuc1"},
		{"zone_b,zone_a", "omen2 nuc2 nuc1"},
		{"omen2,nuc1", "omen2 nuc1"},
		{"gpu:!zone_b", "nuc1 omen"},
		{"gpu:&zone_b", "nuc2 omen2"},
		{"!zone_b:gpu", "nuc1 omen"},
		{"&gpu:zone_b:zone_a", "omen2 nuc2 nuc1"},
		{"zone_b:zone_a:&nuc:!nuc2", "nuc1"},
		{"omen*", "omen omen2"},
		{"node0?", "node01 node02 node03"},
		{"node0[!3]", "node01 node02"},
		// Python's fnmatch reads a class that starts with ^ literally.
		{"node0[^3]", "node03"},
		{"rack[1]", "node02"},
		{"om*:!omen2", "omen"},
		{"~nuc\\d", "nuc1 nuc2"},
		{"gpu[0]", "nuc1"},
		{"gpu[-1]", "omen2"},
		{"gpu[1:2]", "nuc2 omen"},
		{"rack[2:]", "node03 spare"},
		{" omen , nuc1 ", "omen nuc1"},
		{"nuc1:nuc1:nuc*", "nuc1 nuc2"},
		{"!gpu", "bastion node01 node02 node03 spare"},
	}
	for _, tt := range tests {
		hosts, err := inv.Select(tt.pattern)
		if err != nil {
			t.Errorf("Select(%q): %v", tt.pattern, err)
			continue
		}
		var names []string
		for _, h := range hosts {
			names = append(names, h.Name)
		}
		if got := strings.Join(names, " "); got != tt.want {
			t.Errorf("Select(%q) = %q, want %q", tt.pattern, got, tt.want)
		}
	}
}

func TestSelectNoMatch(t *testing.T) {
	inv := loadGood(t)
	for _, p := range []string{"nuc9", "gpu:&rack", "gpu:!gpu", "", "~(", "zz*"} {
		_, err := inv.Select(p)
		if err == nil {
			t.Errorf("Select(%q): want error", p)
			continue
		}
		if p != "" && p != "~(" && !strings.Contains(err.Error(), "no hosts matched pattern "+`"`+p+`"`) {
			t.Errorf("Select(%q) error %q does not name the pattern", p, err)
		}
	}
}

func TestExpandHost(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		port int
	}{
		{"n[1:3]", []string{"n1", "n2", "n3"}, 0},
		{"n[01:03]x", []string{"n01x", "n02x", "n03x"}, 0},
		{"[a:c]-[1:2]", []string{"a-1", "a-2", "b-1", "b-2", "c-1", "c-2"}, 0},
		{"n[0:6:3]", []string{"n0", "n3", "n6"}, 0},
		{"h:2200", []string{"h"}, 2200},
		{"n[1:2]:2200", []string{"n1", "n2"}, 2200},
	}
	for _, tt := range tests {
		got, port, err := expandHost(tt.in)
		if err != nil {
			t.Errorf("expandHost(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" || port != tt.port {
			t.Errorf("expandHost(%q) port %d want %d (-want +got):\n%s", tt.in, port, tt.port, diff)
		}
	}
	for _, bad := range []string{"n[3:1]", "n[1:x]", "n[01:100]", "n[1:2", "h:x", "n[0:99999]"} {
		if _, _, err := expandHost(bad); err == nil {
			t.Errorf("expandHost(%q): want error", bad)
		}
	}
}

func TestBadCorpus(t *testing.T) {
	tests := []struct {
		file, pos, phrase string
	}{
		{"tab.yaml", "tab.yaml:3:1", "tab"},
		{"hosts_list.yaml", "hosts_list.yaml:5:9", "not a list"},
		{"unknown_key.yaml", "unknown_key.yaml:4:7", `unknown key "chidren" in group "gpu": only hosts, children and vars are allowed (did you mean children?)`},
		{"cycle.yaml", "cycle.yaml:9:17", "group cycle: a -> b -> c -> a"},
		{"bad_port.yaml", "bad_port.yaml:5:21", `ansible_port: port "twenty-two" is not a number`},
		{"host_scalar.yaml", "host_scalar.yaml:3:11", `host "omen": vars must be a mapping`},
		{"not_mapping.yaml", "not_mapping.yaml:1:1", "inventory must be a mapping of group names"},
		{"bad_become.yaml", "bad_become.yaml:3:21", "ansible_become: expected a boolean"},
		{"empty.yaml", "empty.yaml:1:1", "inventory is empty"},
		{"toplevel_hosts.yaml", "toplevel_hosts.yaml:1:1", `top-level key "hosts" is a group keyword`},
		{"group_scalar.yaml", "group_scalar.yaml:3:10", `group "gpu" must be a mapping`},
		{"hostvars_port/inventory.yaml", "hostvars_port/host_vars/omen.yml:2:15", "ansible_port: port must be a number"},
	}
	for _, tt := range tests {
		path := filepath.Join("testdata/bad", tt.file)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: want error", tt.file)
			continue
		}
		var ie *Error
		if !errors.As(err, &ie) {
			t.Errorf("%s: error %q is not an *Error", tt.file, err)
		}
		msg := err.Error()
		if want := filepath.Join("testdata/bad", tt.pos) + ": "; !strings.HasPrefix(msg, want) {
			t.Errorf("%s: error %q does not start with %q", tt.file, msg, want)
		}
		if !strings.Contains(msg, tt.phrase) {
			t.Errorf("%s: error %q does not contain %q", tt.file, msg, tt.phrase)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want a wrapped not-exist error, got %v", err)
	}
}

func TestAliasesAndMergeKeys(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "inv.yaml")
	src := `all:
  vars: &common {a: 1, b: 2}
  children:
    g:
      vars:
        <<: *common
        b: 3
      hosts: {h: *common}
    self: &s
      children: {loop: *s}
`
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), "group cycle") {
		t.Fatalf("want a cycle through the alias, got %v", err)
	}
	src = strings.Replace(src, "    self: &s\n      children: {loop: *s}\n", "", 1)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Groups["g"].Vars["b"]; got != 3 {
		t.Errorf("merge key: b = %v, want 3", got)
	}
	if got := inv.Groups["g"].Vars["a"]; got != 1 {
		t.Errorf("merge key: a = %v, want 1", got)
	}
}

func FuzzLoad(f *testing.F) {
	for _, p := range []string{"testdata/good/lab.yaml", "testdata/bad/cycle.yaml", "testdata/bad/hosts_list.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a: &x {children: {b: *x}}"))
	f.Add([]byte("all: {hosts: {'n[1:3]:22': }}"))
	f.Add([]byte("h1 a=1 b='x y' c=[1,{'k':(2,)}]\n[g]\nn[01:03]:22 v=\"q\\\"\"\n[g:vars]\nx=True # c\n[p:children]\ng\n[p]\n"))
	for _, p := range []string{"testdata/ini/mixed.ini", "testdata/public/deepops-uncommented/inventory"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// No group_vars/ exists beside this path, so only data matters.
		inv, err := load("/nonexistent/fuzz/inv.yaml", data)
		if err != nil {
			return
		}
		if _, err := inv.ListJSON(); err != nil {
			t.Fatalf("ListJSON of a loaded inventory: %v", err)
		}
		_, _ = inv.Select(string(data))
	})
}

func TestSetsProxyCommand(t *testing.T) {
	for args, want := range map[string]bool{
		`-o ProxyCommand="ssh -W %h:%p -q bastion"`: true,
		"-oProxyCommand=nc %h %p":                   true,
		`-o "proxycommand ssh -W %h:%p b" -v`:       true,
		"-o ProxyJump=b":                            false,
		"-o StrictHostKeyChecking=no":               false,
		"":                                          false,
	} {
		if got := SetsProxyCommand(args); got != want {
			t.Errorf("SetsProxyCommand(%q) = %v, want %v", args, got, want)
		}
	}
}

func vaultOpts(t *testing.T) Options {
	t.Helper()
	s, err := vault.ReadPasswordFile(context.Background(), "testdata/vault/password.txt")
	if err != nil {
		t.Fatal(err)
	}
	return Options{Vault: []vault.Secret{s}}
}

func TestINIValues(t *testing.T) {
	inv, err := Load("testdata/ini/mixed.ini")
	if err != nil {
		t.Fatal(err)
	}
	v := inv.Hosts["top1"].Vars
	for k, want := range map[string]any{
		"a": 1, "b": true, "c": "yes", "d": "quoted str", "e": "x y", "f": 1.5, "g": []any{1, 2},
		"h": "{k:v}", "i": 16, "j": "01", "k": nil, "l": "true",
	} {
		if diff := cmp.Diff(want, v[k]); diff != "" {
			t.Errorf("top1 %s (-want +got):\n%s", k, diff)
		}
	}
	if got := inv.Hosts["nodea"].Conn.Port; got != 2200 {
		t.Errorf("nodea port %d", got)
	}
	if got := inv.Hosts["node01"].Vars["v4"]; got != 1 {
		t.Errorf("v4 = %v: a Python comment after a literal is not part of it", got)
	}
}

func TestPyLiteral(t *testing.T) {
	for in, want := range map[string]any{
		"00": 0, "01.5": 1.5, "1_000": 1000, "0b101": 5, "0o17": 15, "1.": 1.0, ".5e-2": 0.005,
		`{1: "a", True: 2, None: 3}`: map[string]any{"1": "a", "true": 2, "null": 3},
		"(1)":                        1, "()": []any{}, "(1,)": []any{1}, `"a" 'b'`: "ab", `r"\d"`: `\d`, `"\d"`: `\d`,
		`b"x"`: "x", "-1.5": -1.5, "- 2": -2, `"\x41\101\u0041"`: "AAA", "'''t'''": "t",
		"[1, [2, (3, 4)], {'k': [5]}]": []any{1, []any{2, []any{3, 4}}, map[string]any{"k": []any{5}}},
		"True":                         true, "None": nil,
		// Not literals: the text itself.
		"yes": "yes", "true": "true", "01": "01", "1+2": "1+2", "f'x'": "f'x'", "1j": "1j", "--1": "--1",
		"-True": "-True", "hello world": "hello world", "[1,": "[1,", "x=1": "x=1", "'a": "'a",
		"99999999999999999999": "99999999999999999999", `"\N{DASH}"`: `"\N{DASH}"`, "1 2": "1 2",
	} {
		got, err := pyLiteral(in)
		if err != nil {
			t.Errorf("pyLiteral(%q): %v", in, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pyLiteral(%q) (-want +got):\n%s", in, diff)
		}
	}
	if _, err := pyLiteral("{1, 2}"); err == nil {
		t.Error("a set literal must be refused")
	}
}

func TestShlexSplit(t *testing.T) {
	for in, want := range map[string][]string{
		`h x=foo#bar y="a\"b\c" z=a\ b w='q\x'`: {"h", "x=foo"},
		`h y="a\"b\c" z=a\ b w='q\x' # c`:       {"h", `y=a"b\c`, "z=a b", `w=q\x`},
		`h e="" f=''`:                           {"h", "e=", "f="},
		`h a="b c"d`:                            {"h", "a=b cd"},
	} {
		got, err := shlexSplit(in)
		if err != nil {
			t.Errorf("shlexSplit(%q): %v", in, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("shlexSplit(%q) (-want +got):\n%s", in, diff)
		}
	}
	for _, bad := range []string{`h a="b`, `h a='b`, `h a=\`} {
		if _, err := shlexSplit(bad); err == nil {
			t.Errorf("shlexSplit(%q): want error", bad)
		}
	}
}

func TestVault(t *testing.T) {
	inv, err := LoadSources([]string{"testdata/vault/inventory.yml"}, vaultOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	g1 := inv.Hosts["gpu1"].Vars
	for k, want := range map[string]any{
		"registry_password": "registry-pass-0042", "bmc_password": "bmc-pass-for-gpu1",
		"tokens":      []any{map[string]any{"key": "nested-token-value"}, "plain"},
		"db_password": "decrypted-from-file", "dcgm_token": "dcgm-token-xyz", "gpu_driver": "550",
	} {
		if diff := cmp.Diff(want, g1[k]); diff != "" {
			t.Errorf("gpu1 %s (-want +got):\n%s", k, diff)
		}
	}
	if got := inv.Hosts["gpu2"].Vars["host_secret"]; got != "host-level-secret-1" {
		t.Errorf("gpu2 host_secret from an encrypted host_vars file = %v", got)
	}
	if got := inv.Groups["all"].Vars["registry_password"]; got != "registry-pass-0042" {
		t.Errorf("group var = %v", got)
	}
	secrets := strings.Join(inv.Secrets(), "\n")
	for _, s := range []string{"registry-pass-0042", "bmc-pass-for-gpu1", "nested-token-value", "decrypted-from-file", "sudo-secret-77", "host-level-secret-1", "dcgm-token-xyz"} {
		if !strings.Contains(secrets, s) {
			t.Errorf("Secrets() lacks %q", s)
		}
	}
	if strings.Contains(secrets, "10.1.0.1") || strings.Contains(secrets, "550") {
		t.Errorf("Secrets() holds plain values: %v", inv.Secrets())
	}
	b, err := inv.ListJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"registry-pass-0042", "bmc-pass-for-gpu1", "nested-token-value"} {
		if strings.Contains(string(b), s) {
			t.Errorf("ListJSON shows the inline vaulted value %q", s)
		}
	}
}

func TestVaultErrors(t *testing.T) {
	_, err := Load("testdata/vault/inventory.yml")
	if err == nil || !strings.HasPrefix(err.Error(), "testdata/vault/inventory.yml:5:24: vaulted value: no vault password given") {
		t.Errorf("no password: %v", err)
	}
	wrong := Options{Vault: []vault.Secret{{Source: "x", Password: []byte("wrong")}}}
	_, err = LoadSources([]string{"testdata/vault/inventory.yml"}, wrong)
	if err == nil || !strings.Contains(err.Error(), "vaulted value: decryption failed") {
		t.Errorf("wrong password: %v", err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "group_vars", "all"), 0o755); err != nil {
		t.Fatal(err)
	}
	enc, err := os.ReadFile("testdata/vault/group_vars/all/vault.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "group_vars", "all", "vault.yml"), enc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte("h1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(filepath.Join(dir, "hosts"))
	want := filepath.Join(dir, "group_vars", "all", "vault.yml") + ":1:1: vault-encrypted vars file: no vault password given"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("encrypted vars file without password: %v, want %s", err, want)
	}
}

func TestINIErrors(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"[gpu]\nnode1 ansible_port=x\n", "inv:2: INI: host \"node1\": ansible_port: port \"x\" is not a number"},
		{"[gpu:foo]\n", "inv:1: INI: section [gpu:foo] has unknown type"},
		{"[a:children]\nb\n", "inv:2: INI: section [a:children] names group \"b\", which is declared nowhere"},
		{"[a:vars]\nx=1\n", "inv:1: INI: section [a:vars] is for a group that is declared nowhere"},
		{"[gpu]\nnode1 novalue\n", "inv:2: INI: expected key=value host variable after host \"node1\", got: novalue"},
		{"[gpu]\nnode1 a=\"b\n", "inv:2: INI: host line"},
		{"[gpu]\nnode1:\n", "inv:2: INI: host \"node1:\""},
		{"[bad group]\n", "inv:1: INI: invalid section [bad group]"},
		{"[g]\nh\n[g:vars]\nnovalue\n", "inv:4: INI: expected key=value in [g:vars]"},
		{"[a]\n[b]\n[a:children]\nb\n[b:children]\na\n", "inv:6: INI: group cycle"},
		{"[g]\nh v={1,2}\n", "inv:2: INI: host \"h\": v: a Python set literal"},
	} {
		_, err := load("inv", []byte(tt.src))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want prefix %q", tt.src, err, tt.want)
		}
	}
}

// TestINIPendingChildren: a child group may be declared after the
// [parent:children] that names it.
func TestINIPendingChildren(t *testing.T) {
	inv, err := load("inv", []byte("[k8s:children]\ngpu\ncpu\n\n[gpu]\ng1\n\n[cpu:children]\narm\n\n[arm]\na1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpu", "cpu"}, inv.Groups["k8s"].Children); diff != "" {
		t.Errorf("k8s children (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"all", "arm", "cpu", "k8s"}, inv.Hosts["a1"].Groups); diff != "" {
		t.Errorf("a1 groups (-want +got):\n%s", diff)
	}
}

func TestFormatErrors(t *testing.T) {
	// A YAML file with a syntax error: the YAML error, at the problem's
	// line and column, and no word about INI.
	_, err := load("x.yaml", []byte("all:\n  hosts:\n\tomen:\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "x.yaml:3:1: invalid YAML: ") || strings.Contains(err.Error(), "INI") {
		t.Errorf("tab: %v", err)
	}
	_, err = load("bad.yaml", []byte("all:\n  hosts:\n    a:\n      ansible_host: 10.0.0.1\n  - b\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "bad.yaml:5:3: invalid YAML: did not find expected key") || strings.Contains(err.Error(), "INI") {
		t.Errorf("list item under a mapping: %v", err)
	}
	// A file that could be INI (a host line with vars) but is neither:
	// the YAML error, with why INI failed.
	_, err = load("x.yaml", []byte("gpu:\n\tnode1 ansible_host=\"10.0.0.1\n"))
	if err == nil || !strings.Contains(err.Error(), "not INI either: line") {
		t.Errorf("INI-like: %v", err)
	}
	// An INI-looking file that is neither: the INI error first.
	_, err = load("x.yaml", []byte("[gpu]\nnode1 a=\"b\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "x.yaml:2: INI: host line") {
		t.Errorf("ini: %v", err)
	}
	_, err = load("x.yaml", []byte("plugin: aws_ec2\nregions: [x]\n"))
	if err == nil || !strings.Contains(err.Error(), "inventory plugin configuration (plugin: aws_ec2)") {
		t.Errorf("plugin: %v", err)
	}
	if _, err := LoadSources([]string{t.TempDir()}, Options{}); err == nil || !strings.Contains(err.Error(), "holds no inventory file") {
		t.Errorf("empty dir: %v", err)
	}
	script := filepath.Join(t.TempDir(), "ec2.py")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env python3\nprint('{}')\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(script); err == nil || !strings.Contains(err.Error(), "executable inventory script") {
		t.Errorf("script: %v", err)
	}
}

func TestDirectoryRules(t *testing.T) {
	inv, err := Load("testdata/dir")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"never1", "never2", "never3", "never4", "never5"} {
		if _, ok := inv.Hosts[h]; ok {
			t.Errorf("host %s from an ignored file was read", h)
		}
	}
	v := inv.Hosts["node01"].Vars
	if v["who"] != "all-dir-2" || v["from_all_yml"] != nil {
		t.Errorf("group_vars/all.yml must be hidden by group_vars/all/: who=%v from_all_yml=%v", v["who"], v["from_all_yml"])
	}
	if v["gpu_yml"] != 1 || v["gpu_yaml"] != nil {
		t.Errorf("only the first of gpu.yml/gpu.yaml is read: %v %v", v["gpu_yml"], v["gpu_yaml"])
	}
	for _, name := range []string{"a.ini", "b.txt", ".h", "group_vars", "host_vars", "c~", "d.retry", "e.cfg"} {
		if !IgnoredInDirectory(name) {
			t.Errorf("%s must be ignored", name)
		}
	}
	if IgnoredInDirectory("hosts.yml") || IgnoredInDirectory("hosts") {
		t.Error("hosts.yml and hosts are inventory files")
	}
}

// Issue 29 item 2: a host or group name with a control character is
// refused at load, naming the file and line, in every form a name takes
// (YAML host and group keys, children, INI hosts, sections, children, a
// host list); names are never printed raw.
func TestControlCharacterNamesRefused(t *testing.T) {
	for _, c := range []struct{ file, src, at string }{
		{"a.yaml", "all:\n  hosts:\n    \"evil\\nnuc2 : ok=3\":\n", "a.yaml:3:"},
		{"a.yaml", "\"g\\x1b[2J\":\n  hosts:\n    h:\n", "a.yaml:1:"},
		{"a.yaml", "all:\n  children:\n    \"g\\u202e\":\n      hosts:\n        h:\n", "a.yaml:3:"},
		{"a.yaml", "all:\n  hosts:\n    \"n\\x00[1:2]\":\n", "a.yaml:3:"},
		{"a.ini", "h1\nevil\x1b]0;t\x07\n", "line 2: host"},
		{"a.ini", "[ok]\nh\n[bad\x1bgroup]\nh2\n", "a.ini:3:"},
		{"a.ini", "[p:children]\nc\x07\n[c\x07]\nh\n", "a.ini:2:"},
	} {
		_, err := load(c.file, []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.at) || !strings.Contains(err.Error(), "control character") {
			t.Errorf("%q: want an error at %s naming the control character, got %v", c.src, c.at, err)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\n\x1b\x00\x07") {
			t.Errorf("%q: the error holds the raw name: %q", c.src, err)
		}
	}
	for _, src := range []string{"all:\n  hosts:\n    \" nuc1\":\n", "all:\n  hosts:\n    \" \":\n", "\"gpu \":\n  hosts:\n    h:\n"} {
		if _, err := load("a.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "a.yaml:") || !strings.Contains(err.Error(), "starts or ends with a space") {
			t.Errorf("%q: want an error naming the space, got %v", src, err)
		}
	}
	if _, err := load("ok.yaml", []byte("all:\n  hosts:\n    nüc-1.example:\n  children:\n    gpu_ü:\n      hosts:\n        x:\n")); err != nil {
		t.Errorf("printable names refused: %v", err)
	}
}
