package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// counts is one host's line of a recap, in Ansible's terms: ok counts
// every task that did not fail or skip (changed ones too).
type counts struct{ OK, Changed, Unreachable, Failed, Skipped, Rescued, Ignored int }

func (c counts) String() string {
	return fmt.Sprintf("ok=%d changed=%d unreachable=%d failed=%d skipped=%d rescued=%d ignored=%d", c.OK, c.Changed, c.Unreachable, c.Failed, c.Skipped, c.Rescued, c.Ignored)
}

var recapLine = regexp.MustCompile(`(?m)^(\S+)\s+:\s+(ok=\d+.*)$`)
var recapField = regexp.MustCompile(`(\w+)=(\d+)`)

// parseRecap reads the PLAY RECAP of ansible-playbook or the RECAP of
// nodeconverge. nodeconverge's ok excludes changed tasks; ansible=true
// says the counts are Ansible's already.
func parseRecap(t *testing.T, out string, ansible bool) map[string]counts {
	t.Helper()
	i := strings.LastIndex(out, "RECAP")
	if i < 0 {
		t.Fatalf("no recap in:\n%s", out)
	}
	res := map[string]counts{}
	for _, m := range recapLine.FindAllStringSubmatch(out[i:], -1) {
		var c counts
		for _, f := range recapField.FindAllStringSubmatch(m[2], -1) {
			n, _ := strconv.Atoi(f[2])
			switch f[1] {
			case "ok":
				c.OK = n
			case "changed":
				c.Changed = n
			case "unreachable":
				c.Unreachable = n
			case "failed":
				c.Failed = n
			case "skipped":
				c.Skipped = n
			case "rescued":
				c.Rescued = n
			case "ignored":
				c.Ignored = n
			}
		}
		if !ansible {
			// Ansible counts a changed task and an ignored failure as ok too.
			c.OK += c.Changed + c.Ignored
		}
		res[m[1]] = c
	}
	return res
}

// ansiblePlaybook runs the real ansible-playbook against a lab.
func ansiblePlaybook(t *testing.T, l *labtest.Lab, pb string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ansible.cfg")
	if err := os.WriteFile(cfg, []byte(`[defaults]
gathering = explicit
host_key_checking = True
interpreter_python = /usr/bin/python3
retry_files_enabled = False
deprecation_warnings = False
nocolor = True
[ssh_connection]
pipelining = True
ssh_args = -o ControlMaster=auto -o ControlPersist=30s -o BatchMode=yes -o IdentitiesOnly=yes -F /dev/null
control_path_dir = `+filepath.Join(dir, "cp")+`
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/ansible-playbook", "-i", l.Inventory, pb)
	cmd.Env = append(os.Environ(), "ANSIBLE_CONFIG="+cfg, "ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"), "HOME="+dir, "SSH_AUTH_SOCK=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("ansible-playbook: %v", err)
		}
	}
	return out.String()
}

// TestAnsiblePlaybooks runs each playbook of testdata/ansible-playbooks
// with ansible-playbook on one fresh lab and with nodeconverge apply on
// another, twice each, and asserts the same recap per host (ok, changed,
// failed, skipped, ignored) on the first run and on the second; for a
// playbook with roles, also the same node state afterwards (files and
// their modes, loaded kernel modules, each unit's state, the node's sysctl
// values) and nothing changed by the second run. Before
// nodeconverge's first run, --check plans changes and leaves every node's
// tree as it was.
func TestAnsiblePlaybooks(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ansible-playbook"); err != nil {
		t.Fatalf("ansible-playbook is needed (apt-get install ansible-core): %v", err)
	}
	books, err := filepath.Glob("testdata/ansible-playbooks/*/site.yaml")
	if err != nil || len(books) == 0 {
		t.Fatalf("no playbooks: %v", err)
	}
	var table []string
	for _, pb := range books {
		pb, _ = filepath.Abs(pb)
		name := filepath.Base(filepath.Dir(pb))
		t.Run(name, func(t *testing.T) {
			var ans, ncr [2]map[string]counts
			var ansOut, ncOut [2]string
			// A playbook that runs roles is also compared by the files it
			// leaves on the nodes, and must change nothing the second
			// time under either tool.
			// So is one with a compare-files marker.
			_, err := os.Stat(filepath.Join(filepath.Dir(pb), "roles"))
			_, merr := os.Stat(filepath.Join(filepath.Dir(pb), "compare-files"))
			withRoles := err == nil || merr == nil
			ansTrees, ncTrees := map[string]map[string]string{}, map[string]map[string]string{}
			roleState := func(l *labtest.Lab, node string) map[string]string {
				return labNodeState(t, l, node, labUnits(t, l, node))
			}
			func() {
				l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
				for i := range ansOut {
					ansOut[i] = ansiblePlaybook(t, l, pb)
					ans[i] = parseRecap(t, ansOut[i], true)
				}
				for _, n := range l.Nodes {
					ansTrees[n.Name] = roleState(l, n.Name)
				}
			}()
			func() {
				l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
				// Check mode first: it fails nothing (exit 2, or 0 when
				// every change hangs on a command it does not run) and
				// changes nothing on the nodes.
				before := map[string]map[string]string{}
				for _, n := range l.Nodes {
					before[n.Name] = l.HashTree(t, n.Name)
				}
				chk := nc(t, append([]string{"apply", "--check"}, labArgs(l, pb)...)...)
				if chk.code != 2 && chk.code != 0 {
					t.Errorf("--check on a fresh lab: want exit 2 (changes pending) or 0, got %s", chk)
				}
				for _, n := range l.Nodes {
					if d := cmp.Diff(before[n.Name], l.HashTree(t, n.Name)); d != "" {
						t.Errorf("--check changed %s (-before +after):\n%s", n.Name, d)
					}
				}
				for i := range ncOut {
					r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
					ncOut[i] = r.stdout + r.stderr
					ncr[i] = parseRecap(t, ncOut[i], false)
				}
				for _, n := range l.Nodes {
					ncTrees[n.Name] = roleState(l, n.Name)
				}
			}()
			if withRoles {
				if d := cmp.Diff(ansTrees, ncTrees); d != "" {
					t.Errorf("the nodes differ (files, modules, units, sysctl values; -ansible-playbook +nodeconverge):\n%s\n--- ansible\n%s\n--- nodeconverge\n%s", d, ansOut[1], ncOut[1])
				}
				for host, c := range ans[1] {
					if c.Changed != 0 || ncr[1][host].Changed != 0 {
						t.Errorf("second run changed something on %s: ansible-playbook %s, nodeconverge %s", host, c, ncr[1][host])
					}
				}
			}
			for i := range ans {
				for host, a := range ans[i] {
					n, ok := ncr[i][host]
					table = append(table, fmt.Sprintf("%-18s run %d %-7s ansible: %s | nodeconverge: %s", name, i+1, host, a, n))
					if !ok || a != n {
						t.Errorf("run %d, %s:\n ansible-playbook %s\n nodeconverge     %s\n--- ansible\n%s\n--- nodeconverge\n%s", i+1, host, a, n, ansOut[i], ncOut[i])
					}
				}
				if len(ans[i]) != len(ncr[i]) || len(ans[i]) == 0 {
					t.Errorf("run %d: hosts differ: ansible %v, nodeconverge %v", i+1, ans[i], ncr[i])
				}
			}
		})
	}
	t.Logf("recaps:\n%s", strings.Join(table, "\n"))
}

// TestListLikeAnsible: --list-hosts and --list-tasks print what
// ansible-playbook prints, byte for byte, with --limit and --tags too.
// Nothing is contacted, so no lab is needed.
func TestListLikeAnsible(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(inv, []byte("all:\n  children:\n    gpu:\n      hosts:\n        node1: {ansible_host: 127.0.0.1}\n        node2: {ansible_host: 127.0.0.1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	books, err := filepath.Glob("testdata/ansible-playbooks/*/site.yaml")
	if err != nil || len(books) == 0 {
		t.Fatalf("no playbooks: %v", err)
	}
	for _, pb := range books {
		for _, extra := range [][]string{nil, {"-l", "node2"}, {"--tags", "checks,marker"}, {"--skip-tags", "marker"}} {
			args := append([]string{"-i", inv, pb, "--list-hosts", "--list-tasks"}, extra...)
			cmd := exec.Command("/usr/bin/ansible-playbook", args...)
			cmd.Env = append(os.Environ(), "ANSIBLE_NOCOLOR=1", "HOME="+dir, "ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"))
			want, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("ansible-playbook %v: %v\n%s", args, err, want)
			}
			got := nc(t, append([]string{"apply"}, args...)...)
			if got.code != 0 || sortHosts(got.stdout) != sortHosts(string(want)) {
				t.Errorf("%s %v:\n--- ansible-playbook\n%s\n--- nodeconverge\n%s", pb, extra, want, got)
			}
		}
	}
}

// sortHosts sorts the host lines under each "hosts (N):" of a listing:
// ansible-playbook prints them in an order that changes from run to run
// (Python's string hashing), nodeconverge in inventory order.
func sortHosts(s string) string {
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "hosts (") {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.HasPrefix(lines[j], "      ") {
			j++
		}
		sort.Strings(lines[i+1 : j])
		i = j - 1
	}
	return strings.Join(lines, "\n")
}

// labUnits names the units a node has of its own (the unit files under its
// /etc/systemd/system and /run/systemd/system) and containerd: the units
// whose states a role can change in the lab.
func labUnits(t *testing.T, l *labtest.Lab, node string) []string {
	t.Helper()
	units := []string{"containerd"}
	for _, dir := range []string{"etc/systemd/system", "run/systemd/system"} {
		ents, err := os.ReadDir(filepath.Join(l.Dir, "nodes", node, dir))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range ents {
			if name, ok := strings.CutSuffix(e.Name(), ".service"); ok && !e.IsDir() {
				units = append(units, name)
			}
		}
	}
	sort.Strings(units[1:])
	return units
}
