package edit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	_ "nodeconverge/modules/blockinfile"
	_ "nodeconverge/modules/lineinfile"
	_ "nodeconverge/modules/replace"
)

// editCase is one task of a line-level module on one file.
type editCase struct {
	name    string
	module  string
	args    map[string]any // path is added
	initial *string        // nil: no file
}

func s(v string) *string { return &v }

const hosts = "# /etc/hosts\n127.0.0.1 localhost\n::1 ip6-localhost\n"
const modprobe = "options nouveau modeset=1\nblacklist radeon\n# end\n"
const grub = "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\nGRUB_CMDLINE_LINUX=\"\"\n"

// cases cover each branch of Ansible's present()/absent() (lineinfile),
// main() (blockinfile) and main() (replace), with files as node-prep roles
// find them.
var cases = []editCase{
	{"li append", "lineinfile", map[string]any{"line": "overlay"}, s("br_netfilter\n")},
	{"li append no final newline", "lineinfile", map[string]any{"line": "overlay"}, s("br_netfilter")},
	{"li exact line present", "lineinfile", map[string]any{"line": "br_netfilter"}, s("overlay\nbr_netfilter\n")},
	{"li exact line without final newline", "lineinfile", map[string]any{"line": "br_netfilter"}, s("overlay\nbr_netfilter")},
	{"li regexp replace last", "lineinfile", map[string]any{"regexp": "^GRUB_TIMEOUT=", "line": "GRUB_TIMEOUT=1"}, s(grub + "GRUB_TIMEOUT=9\n")},
	{"li regexp firstmatch", "lineinfile", map[string]any{"regexp": "^GRUB_TIMEOUT=", "line": "GRUB_TIMEOUT=1", "firstmatch": true}, s(grub + "GRUB_TIMEOUT=9\n")},
	{"li regexp no match appends", "lineinfile", map[string]any{"regexp": "^vm.swappiness", "line": "vm.swappiness = 0"}, s("net.ipv4.ip_forward = 1\n")},
	{"li regexp dollar", "lineinfile", map[string]any{"regexp": "^#?net.ipv4.ip_forward\\s*=.*$", "line": "net.ipv4.ip_forward = 1"}, s("#net.ipv4.ip_forward=0\n")},
	{"li backrefs", "lineinfile", map[string]any{"regexp": "^(GRUB_CMDLINE_LINUX=\")(.*)\"$", "line": "\\1\\2 cgroup_enable=memory\"", "backrefs": true}, s(grub)},
	{"li backrefs named", "lineinfile", map[string]any{"regexp": "^(?P<k>GRUB_DEFAULT)=.*", "line": "\\g<k>=saved", "backrefs": true}, s(grub)},
	{"li backrefs no match", "lineinfile", map[string]any{"regexp": "^NOPE=(.*)", "line": "\\1", "backrefs": true}, s(grub)},
	{"li insertafter regexp", "lineinfile", map[string]any{"line": "::1 node1", "insertafter": "^127\\.0\\.0\\.1"}, s(hosts)},
	{"li insertafter last line", "lineinfile", map[string]any{"line": "10.0.0.1 node1", "insertafter": "ip6-localhost"}, s(hosts)},
	{"li insertafter already there", "lineinfile", map[string]any{"line": "::1 ip6-localhost", "insertafter": "^127"}, s(hosts)},
	{"li insertafter no match", "lineinfile", map[string]any{"line": "10.0.0.1 node1", "insertafter": "^nomatch"}, s(hosts)},
	{"li insertbefore regexp", "lineinfile", map[string]any{"line": "# managed", "insertbefore": "^127"}, s(hosts)},
	{"li insertbefore first line", "lineinfile", map[string]any{"line": "# top", "insertbefore": "^# /etc/hosts"}, s(hosts)},
	{"li insertbefore BOF", "lineinfile", map[string]any{"line": "# first", "insertbefore": "BOF"}, s(hosts)},
	{"li insertafter BOF", "lineinfile", map[string]any{"line": "# first", "insertafter": "BOF"}, s(hosts)},
	{"li search_string", "lineinfile", map[string]any{"search_string": "localhost", "line": "127.0.1.1 node1"}, s(hosts)},
	{"li create", "lineinfile", map[string]any{"line": "overlay", "create": true}, nil},
	{"li missing file", "lineinfile", map[string]any{"line": "overlay"}, nil},
	{"li absent regexp", "lineinfile", map[string]any{"regexp": "^options nouveau", "state": "absent"}, s(modprobe)},
	{"li absent line", "lineinfile", map[string]any{"line": "blacklist radeon", "state": "absent"}, s(modprobe)},
	{"li absent search_string", "lineinfile", map[string]any{"search_string": "nouveau", "state": "absent"}, s(modprobe)},
	{"li absent nothing", "lineinfile", map[string]any{"line": "nope", "state": "absent"}, s(modprobe)},
	{"li absent missing file", "lineinfile", map[string]any{"line": "nope", "state": "absent"}, nil},
	{"li swap fstab comment", "lineinfile", map[string]any{"regexp": "^([^#].*\\sswap\\s.*)$", "line": "# \\1", "backrefs": true}, s("UUID=1 / ext4 defaults 0 1\n/swap.img none swap sw 0 0\n")},
	{"li crlf exact", "lineinfile", map[string]any{"line": "b"}, s("a\r\nb\r\n")},
	{"li crlf regexp", "lineinfile", map[string]any{"regexp": "^b", "line": "c"}, s("a\r\nb\r\n")},
	{"li validate ok", "lineinfile", map[string]any{"line": "overlay", "validate": "grep -q overlay %s"}, s("br_netfilter\n")},
	{"li validate fails", "lineinfile", map[string]any{"line": "overlay", "validate": "grep -q nvidia %s"}, s("br_netfilter\n")},
	{"li empty regexp", "lineinfile", map[string]any{"regexp": "", "line": "x"}, s("a\nb\n")},
	{"li mode", "lineinfile", map[string]any{"line": "overlay", "mode": "0600"}, s("overlay\n")},
	{"bi insert eof", "blockinfile", map[string]any{"block": "overlay\nbr_netfilter"}, s("# modules\n")},
	{"bi insert no final newline", "blockinfile", map[string]any{"block": "overlay\n"}, s("# modules")},
	{"bi update", "blockinfile", map[string]any{"block": "b\nc"}, s("x\n# BEGIN ANSIBLE MANAGED BLOCK\na\n# END ANSIBLE MANAGED BLOCK\ny\n")},
	{"bi same", "blockinfile", map[string]any{"block": "a"}, s("x\n# BEGIN ANSIBLE MANAGED BLOCK\na\n# END ANSIBLE MANAGED BLOCK\ny\n")},
	{"bi remove", "blockinfile", map[string]any{"state": "absent"}, s("x\n# BEGIN ANSIBLE MANAGED BLOCK\na\n# END ANSIBLE MANAGED BLOCK\ny\n")},
	{"bi empty block removes", "blockinfile", map[string]any{"block": ""}, s("x\n# BEGIN ANSIBLE MANAGED BLOCK\na\n# END ANSIBLE MANAGED BLOCK\n")},
	{"bi marker", "blockinfile", map[string]any{"block": "10.0.0.1 n1", "marker": "# {mark} k8s hosts", "marker_begin": "start", "marker_end": "stop"}, s(hosts)},
	{"bi insertafter", "blockinfile", map[string]any{"block": "10.0.0.1 n1", "insertafter": "^127"}, s(hosts)},
	{"bi insertbefore", "blockinfile", map[string]any{"block": "# hdr", "insertbefore": "^::1"}, s(hosts)},
	{"bi insertbefore BOF", "blockinfile", map[string]any{"block": "# hdr", "insertbefore": "BOF"}, s(hosts)},
	{"bi insertafter multiline", "blockinfile", map[string]any{"block": "z", "insertafter": "(?m)^127.*\\n::1"}, s(hosts)},
	{"bi crlf", "blockinfile", map[string]any{"block": "x"}, s("a\r\nb\r\n")},
	{"bi mode", "blockinfile", map[string]any{"block": "x", "mode": "0640"}, s("a\n")},
	{"bi create", "blockinfile", map[string]any{"block": "[Service]\nLimitNOFILE=1048576", "create": true}, nil},
	{"bi absent missing", "blockinfile", map[string]any{"state": "absent"}, nil},
	{"bi missing", "blockinfile", map[string]any{"block": "x"}, nil},
	{"rp simple", "replace", map[string]any{"regexp": "quiet splash", "replace": "quiet"}, s(grub)},
	{"rp groups", "replace", map[string]any{"regexp": "^(GRUB_\\w+)=(\\d+)$", "replace": "\\1='\\2'"}, s(grub)},
	{"rp named", "replace", map[string]any{"regexp": "^(?P<k>GRUB_DEFAULT)=0", "replace": "\\g<k>=saved"}, s(grub)},
	{"rp no match", "replace", map[string]any{"regexp": "^nothing$", "replace": "x"}, s(grub)},
	{"rp same text", "replace", map[string]any{"regexp": "GRUB_DEFAULT=0", "replace": "GRUB_DEFAULT=0"}, s(grub)},
	{"rp comment swap", "replace", map[string]any{"regexp": "^([^#\\n].*\\sswap\\s.*)$", "replace": "# \\1"}, s("UUID=1 / ext4 defaults 0 1\n/swap.img none swap sw 0 0\n/dev/sdb2 none swap sw 0 0\n")},
	{"rp after", "replace", map[string]any{"regexp": "0", "replace": "1", "after": "GRUB_TIMEOUT"}, s(grub)},
	{"rp before", "replace", map[string]any{"regexp": "0", "replace": "1", "before": "GRUB_TIMEOUT"}, s(grub)},
	{"rp after before", "replace", map[string]any{"regexp": "=", "replace": ":", "after": "GRUB_DEFAULT", "before": "GRUB_CMDLINE"}, s(grub)},
	{"rp after no match", "replace", map[string]any{"regexp": "=", "replace": ":", "after": "NOPE"}, s(grub)},
	{"rp delete lines", "replace", map[string]any{"regexp": "^blacklist .*\\n"}, s(modprobe)},
	{"rp missing", "replace", map[string]any{"regexp": "x"}, nil},
}

// ansibleResult is what Ansible's json callback reports of one task.
type ansibleResult struct {
	Changed bool   `json:"changed"`
	Failed  bool   `json:"failed"`
	Msg     string `json:"msg"`
	Found   *int   `json:"found"`
}

// runAnsible runs tasks through Ansible's own module code
// (testdata/ansible_modules.py) and returns their results in order.
func runAnsible(t *testing.T, dir string, tasks []map[string]any) []ansibleResult {
	t.Helper()
	b, err := json.Marshal(tasks)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "tasks.json")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	driver, err := filepath.Abs("testdata/ansible_modules.py")
	if err != nil {
		t.Fatal(err)
	}
	// Debian's python3, which ansible-core is installed for (a pyenv
	// python3 first on PATH has no ansible).
	cmd := exec.Command("/usr/bin/python3", driver, in, tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ansible modules: %v\n%s", err, stderr.String())
	}
	var out []ansibleResult
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out) != len(tasks) {
		t.Fatalf("ansible modules' results (%d for %d tasks): %v\n%s", len(out), len(tasks), err, stdout.String())
	}
	return out
}

// TestLikeAnsible runs every case through Ansible's own module code
// (ansible-core's lineinfile, blockinfile, replace) and through nodeconverge's, each on
// its own copy of the file, twice, and asserts the same file afterwards,
// the same changed, failed and msg on both runs, and the same `found` for
// lineinfile's absent.
func TestLikeAnsible(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ansible-playbook"); err != nil {
		t.Fatalf("ansible-playbook is needed (lab/deps.sh installs it): %v", err)
	}
	dir := t.TempDir()
	var tasks []map[string]any
	for i, c := range cases {
		for _, side := range []string{"ans", "nc"} {
			p := filepath.Join(dir, side, fmt.Sprint(i), "f")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if c.initial != nil {
				if err := os.WriteFile(p, []byte(*c.initial), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		for run := 0; run < 2; run++ {
			args := map[string]any{"path": filepath.Join(dir, "ans", fmt.Sprint(i), "f")}
			for k, v := range c.args {
				args[k] = v
			}
			tasks = append(tasks, map[string]any{"module": c.module, "args": args})
		}
	}
	got := runAnsible(t, dir, tasks)
	root := t.TempDir()
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
	ctx := context.Background()
	for i, c := range cases {
		m, _ := module.Lookup(c.module)
		path := filepath.Join(dir, "nc", fmt.Sprint(i), "f")
		for run := 0; run < 2; run++ {
			want := got[2*i+run]
			args := map[string]any{"path": path}
			for k, v := range c.args {
				args[k] = v
			}
			var n yaml.Node
			if err := n.Encode(args); err != nil {
				t.Fatal(err)
			}
			a := m.NewArgs()
			if err := n.Decode(a); err != nil {
				t.Fatalf("%s: decode: %v", c.name, err)
			}
			var res ansibleResult
			plan, err := func() (*module.Plan, error) {
				if err := a.Validate(); err != nil {
					return nil, err
				}
				return m.Check(ctx, transport.ReadOnly(h), a)
			}()
			if err == nil && plan.Changed() {
				if _, err = m.Apply(ctx, h, plan); err == nil {
					h.Refresh()
				}
			}
			if err != nil {
				res.Failed, res.Msg = true, err.Error()
			} else {
				res.Changed = plan.Changed()
				res.Msg, _ = plan.Vars["msg"].(string)
				if f, ok := plan.Vars["found"].(int); ok {
					res.Found = &f
				}
			}
			switch {
			case res.Failed != want.Failed:
				t.Errorf("%s (run %d): failed: nodeconverge %v (%s), ansible %v (%s)", c.name, run+1, res.Failed, res.Msg, want.Failed, want.Msg)
			case res.Failed:
				// Both failed: the same first words (paths differ).
				if w := strings.Fields(want.Msg); len(w) > 0 && !strings.HasPrefix(res.Msg, w[0]) {
					t.Errorf("%s (run %d): failure: nodeconverge %q, ansible %q", c.name, run+1, res.Msg, want.Msg)
				}
			case res.Changed != want.Changed || res.Msg != want.Msg:
				t.Errorf("%s (run %d): nodeconverge changed=%v msg=%q, ansible changed=%v msg=%q", c.name, run+1, res.Changed, res.Msg, want.Changed, want.Msg)
			case want.Found != nil && (res.Found == nil || *res.Found != *want.Found):
				t.Errorf("%s (run %d): found: nodeconverge %v, ansible %d", c.name, run+1, res.Found, *want.Found)
			}
		}
		ab, aerr := os.ReadFile(filepath.Join(dir, "ans", fmt.Sprint(i), "f"))
		nb, nerr := os.ReadFile(path)
		if (aerr == nil) != (nerr == nil) || string(ab) != string(nb) {
			t.Errorf("%s: files differ:\n--- ansible (%v)\n%q\n--- nodeconverge (%v)\n%q", c.name, aerr, ab, nerr, nb)
		}
		if aerr == nil {
			as, _ := os.Stat(filepath.Join(dir, "ans", fmt.Sprint(i), "f"))
			ns, _ := os.Stat(path)
			if as.Mode() != ns.Mode() {
				t.Errorf("%s: modes differ: ansible %v, nodeconverge %v", c.name, as.Mode(), ns.Mode())
			}
		}
	}
}
