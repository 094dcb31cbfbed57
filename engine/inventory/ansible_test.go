package inventory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/engine/vault"
)

// ansibleBin finds an Ansible command. These comparisons are the proof
// that nodeconverge reads inventories as Ansible does, so a missing
// Ansible fails the test (lab/deps.sh installs ansible-core) rather than
// skipping it.
func ansibleBin(t *testing.T, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed for this comparison (lab/deps.sh installs ansible-core): %v", name, err)
	}
	return bin
}

// ansiblePython is the interpreter Ansible's own commands run with.
func ansiblePython(t *testing.T) string {
	t.Helper()
	f, err := os.Open(ansibleBin(t, "ansible"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "#!") {
		t.Fatalf("cannot read the interpreter of ansible: %q %v", line, err)
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		t.Fatalf("ansible has an empty #! line")
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		return fields[1]
	}
	return fields[0]
}

// ansibleEnv is the environment of the Ansible commands: no password
// file but the one a test passes.
func ansibleEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ANSIBLE_VAULT_PASSWORD_FILE=") {
			env = append(env, e)
		}
	}
	return append(env, "ANSIBLE_NOCOLOR=1", "ANSIBLE_LOCALHOST_WARNING=0",
		"ANSIBLE_INVENTORY_UNPARSED_WARNING=0", "ANSIBLE_DEPRECATION_WARNINGS=0")
}

// ansibleInventoryList runs the real `ansible-inventory --list`.
func ansibleInventoryList(t *testing.T, sources []string, vaultFile string) any {
	t.Helper()
	args := []string{"--list"}
	for _, s := range sources {
		args = append(args, "-i", s)
	}
	if vaultFile != "" {
		args = append(args, "--vault-password-file", vaultFile)
	}
	cmd := exec.Command(ansibleBin(t, "ansible-inventory"), args...)
	cmd.Env = ansibleEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ansible-inventory %v: %v\n%s", args, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Failed to parse") || strings.Contains(stderr.String(), "Unable to parse") {
		t.Fatalf("ansible-inventory %v could not parse a source:\n%s", args, stderr.String())
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// ourList is LoadSources + ListJSON, decoded.
func ourList(t *testing.T, sources []string, opts Options) any {
	t.Helper()
	inv, err := LoadSources(sources, opts)
	if err != nil {
		t.Fatalf("LoadSources(%v): %v", sources, err)
	}
	b, err := inv.ListJSON()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// compareSources checks `ansible-inventory --list` against ours, both
// given the vault password file vaultFile when it is not "".
func compareSources(t *testing.T, sources []string, vaultFile string) {
	t.Helper()
	opts := Options{}
	if vaultFile != "" {
		s, err := vault.ReadPasswordFile(context.Background(), vaultFile)
		if err != nil {
			t.Fatal(err)
		}
		opts.Vault = []vault.Secret{s}
	}
	want := ansibleInventoryList(t, sources, vaultFile)
	got := ourList(t, sources, opts)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%v: ListJSON differs from ansible-inventory --list (-ansible +ours):\n%s", sources, diff)
	}
}

type selectCase struct {
	Pattern string `json:"pattern"`
	Limit   string `json:"limit,omitempty"`
}

type selectResult struct {
	Hosts []string `json:"hosts"`
	Error string   `json:"error"`
}

// ansibleSelect evaluates patterns with Ansible's InventoryManager.
func ansibleSelect(t *testing.T, sources []string, cases []selectCase) []selectResult {
	t.Helper()
	req, err := json.Marshal(map[string]any{"sources": sources, "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ansiblePython(t), "testdata/ansible_select.py")
	cmd.Env = ansibleEnv()
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ansible_select.py: %v\n%s", err, stderr.String())
	}
	var res []selectResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("ansible_select.py output %q: %v", out, err)
	}
	if len(res) != len(cases) {
		t.Fatalf("ansible_select.py answered %d cases of %d", len(res), len(cases))
	}
	return res
}

// ourSelect is what the runner does with a play's hosts: and --limit.
func ourSelect(inv *Inventory, c selectCase) ([]string, error) {
	hosts, err := inv.Select(c.Pattern)
	if err != nil {
		return nil, err
	}
	var keep map[string]bool
	if c.Limit != "" {
		lim, err := inv.SelectLimit(c.Limit)
		if err != nil {
			return nil, err
		}
		keep = map[string]bool{}
		for _, h := range lim {
			keep[h.Name] = true
		}
	}
	var out []string
	for _, h := range hosts {
		if keep == nil || keep[h.Name] {
			out = append(out, h.Name)
		}
	}
	if len(out) == 0 {
		return nil, errNoHosts
	}
	return out, nil
}

var errNoHosts = &Error{Msg: "no hosts"}

var removedSubscript = regexp.MustCompile(`^[^~].*\[[0-9]+-[0-9]*\]$`)

// patternCases are compared with Ansible on every pattern inventory.
var patternCases = []string{
	"all", "*", "ungrouped", "gpu", "cpu", "k8s", "etcd", "rack", "zone_b", "nuc", "omens",
	"gpu,etcd", "gpu:etcd", "etcd:gpu", "gpu:!etcd", "gpu:&etcd", "!etcd:gpu", "&gpu:etcd",
	"gpu,!node02", "!gpu", "&gpu", "zone_b:zone_a:&nuc:!nuc2", " omen , nuc1 ", "nuc1:nuc1:nuc*",
	"node0*", "node0?", "node0[!3]", "node0[1-3]", "gpu[1-2]", "node0[12]", "node0[1:3]", "*.example.com", "cpu?",
	"~node0", "~ode0", "~node0[1-3]", "~.*a", "~(cpu|etcd)", "~nuc\\d", "~^om",
	"gpu[0]", "gpu[1]", "gpu[-1]", "gpu[-2]", "gpu[9]", "gpu[-9]", "gpu[1:2]", "gpu[1:]", "gpu[0:0]",
	"gpu[2:1]", "gpu[3:9]", "k8s[5]", "rack[1]", "rack[2:]", "all[0]", "*[-1]", "node0*[1]",
	"gpu[1:2],etcd[0]", "bastion", "10.0.0.5", "spare", "nosuch", "nosuch*", "gpu:nosuch",
	"omen", "omen2,nuc1", "om*:!omen2", "gpu-a.example.com", "gpu-a.example.com:2222",
	"node01:2222", "cpu[a:b]", "all:!all", "ungrouped:&gpu",
}

// TestPatternsMatchAnsible compares Select (and --limit) with Ansible's
// own pattern evaluation, host order included, on a YAML and an INI
// inventory.
func TestPatternsMatchAnsible(t *testing.T) {
	var cases []selectCase
	for _, p := range patternCases {
		cases = append(cases, selectCase{Pattern: p})
	}
	for _, lim := range []string{"gpu[0]", "@testdata/patterns/limit.txt", "@testdata/patterns/limit2.txt",
		"@testdata/patterns/limit.txt,cpu", "nuc*:!nuc1", "~n", "nosuch"} {
		for _, p := range []string{"all", "gpu", "k8s:etcd"} {
			cases = append(cases, selectCase{Pattern: p, Limit: lim})
		}
	}
	for _, src := range []string{"testdata/good/lab.yaml", "testdata/patterns/inv.ini", "testdata/good/diamond.yaml"} {
		inv, err := Load(src)
		if err != nil {
			t.Fatal(err)
		}
		want := ansibleSelect(t, []string{src}, cases)
		for i, c := range cases {
			got, err := ourSelect(inv, c)
			w := want[i]
			name := src + " " + c.Pattern
			if c.Limit != "" {
				name += " -l " + c.Limit
			}
			switch {
			case w.Error != "" || len(w.Hosts) == 0:
				// Ansible: an error, or no host (with a warning): a
				// run would target nothing. Ours refuses.
				if err == nil {
					t.Errorf("%s: Ansible selects nothing (%s), we select %v", name, w.Error, got)
				}
			case removedSubscript.MatchString(c.Pattern):
				if err == nil {
					t.Errorf("%s: a [x-y] subscript must be refused", name)
				}
			case err != nil:
				t.Errorf("%s: Ansible selects %v, we fail: %v", name, w.Hosts, err)
			default:
				if diff := cmp.Diff(w.Hosts, got); diff != "" {
					t.Errorf("%s: (-ansible +ours):\n%s", name, diff)
				}
			}
		}
	}
}

// TestSubscriptRangeRefused: Ansible removed [x-y] subscripts; it still
// warns and applies them, which is never what "node0[1-3]" meant.
func TestSubscriptRangeRefused(t *testing.T) {
	inv, err := Load("testdata/patterns/inv.ini")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"node0[1-3]", "gpu[1-2]", "gpu:node0[1-3]"} {
		_, err := inv.Select(p)
		if err == nil || !strings.Contains(err.Error(), "subscript form Ansible removed") {
			t.Errorf("Select(%q) = %v, want the removed-subscript error", p, err)
		}
	}
	if _, err := inv.SelectLimit("@testdata/patterns/nosuch.txt"); err == nil || !strings.Contains(err.Error(), "limit file") {
		t.Errorf("missing limit file: %v", err)
	}
}

// TestListHostsCLI checks the pattern evaluation the other tests use
// against the real `ansible --list-hosts` command line.
func TestListHostsCLI(t *testing.T) {
	bin := ansibleBin(t, "ansible")
	src := "testdata/patterns/inv.ini"
	inv, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []selectCase{{Pattern: "all"}, {Pattern: "~node0"}, {Pattern: "k8s[1:3]", Limit: "@testdata/patterns/limit.txt,node0*"}} {
		args := []string{c.Pattern, "-i", src, "--list-hosts"}
		if c.Limit != "" {
			args = append(args, "-l", c.Limit)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = ansibleEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ansible %v: %v", args, err)
		}
		var want []string
		for _, l := range strings.Split(string(out), "\n")[1:] {
			if l = strings.TrimSpace(l); l != "" {
				want = append(want, l)
			}
		}
		got, err := ourSelect(inv, c)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ansible %v (-ansible +ours):\n%s", args, diff)
		}
	}
}

// TestSourcesMatchAnsible compares INI files, several -i, inventory
// directories (ignored names, the group_vars/all/ vs all.yml rule) and
// vault with the real ansible-inventory --list.
func TestSourcesMatchAnsible(t *testing.T) {
	for _, tt := range []struct {
		sources []string
		vault   string // the password file
	}{
		{sources: []string{"testdata/ini/mixed.ini"}},
		{sources: []string{"testdata/ini/named_yaml/hosts.yaml"}},
		{sources: []string{"testdata/patterns/inv.ini"}},
		{sources: []string{"testdata/multi/a/inv.yaml", "testdata/multi/b/hosts"}},
		{sources: []string{"testdata/multi/b/hosts", "testdata/multi/a/inv.yaml"}},
		{sources: []string{"testdata/multi/a", "testdata/multi/b"}},
		{sources: []string{"testdata/dir"}},
		{sources: []string{"testdata/dir", "testdata/multi/b/hosts"}},
		{sources: []string{"testdata/vault/inventory.yml"}, vault: "testdata/vault/password.txt"},
		// Host lists (Ansible's host_list plugin): ansible-pull's idiom.
		{sources: []string{"localhost,"}},
		{sources: []string{"a, b:2222 ,10.0.0.1"}},
		{sources: []string{"node9,", "testdata/ini/mixed.ini"}},
	} {
		compareSources(t, tt.sources, tt.vault)
	}
}

// TestPublicCorpus loads every public inventory under testdata/public
// (each directory's SOURCE names the file to load, its vault password
// file if any, and where every file comes from) and compares it with the real
// ansible-inventory --list.
func TestPublicCorpus(t *testing.T) {
	dirs, err := filepath.Glob("testdata/public/*/SOURCE")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("the corpus has %d inventories, want at least 8", len(dirs))
	}
	for _, src := range dirs {
		dir := filepath.Dir(src)
		meta, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		var inv, pw string
		for _, line := range strings.Split(string(meta), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "load":
				inv = filepath.Join(dir, v)
			case "vault-password-file":
				pw = filepath.Join(dir, v)
			}
		}
		if inv == "" {
			t.Fatalf("%s names no inventory", src)
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			compareSources(t, []string{inv}, pw)
		})
	}
}

// TestHostListRefusesVariables: a host list is hosts only; text that would
// be a variable or a second word is refused, never read as INI vars.
func TestHostListRefusesVariables(t *testing.T) {
	for _, list := range []string{"a ansible_host=evil,", "a=1,b", "node'x,"} {
		_, err := LoadSources([]string{list}, Options{})
		if err == nil || !strings.Contains(err.Error(), "host list") {
			t.Errorf("%q: err = %v, want a host list error", list, err)
		}
	}
}
