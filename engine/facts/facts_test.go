package facts

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLikeAnsibleSetup gathers the facts of this machine with the
// script and with Ansible's own setup module, and wants every fact of
// the set to be the same.
func TestLikeAnsibleSetup(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ansible"); err != nil {
		t.Fatalf("ansible is needed (lab/deps.sh installs ansible-core): %v", err)
	}
	out, err := exec.Command("sh", "-c", Query().Cmds[0].Script).Output()
	if err != nil {
		t.Fatalf("facts script: %v", err)
	}
	got, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/ansible", "-c", "local", "-i", "localhost,", "localhost", "-m", "setup", "-a", "gather_subset=!all,!min,distribution,platform,hardware")
	cmd.Env = append(os.Environ(), "ANSIBLE_LOCAL_TEMP="+t.TempDir(), "HOME="+t.TempDir(), "ANSIBLE_NOCOLOR=1")
	aout, err := cmd.Output()
	if err != nil {
		t.Fatalf("ansible setup: %v\n%s", err, aout)
	}
	i := strings.Index(string(aout), "{")
	if i < 0 {
		t.Fatalf("ansible setup printed no JSON:\n%s", aout)
	}
	var res struct {
		Facts map[string]any `json:"ansible_facts"`
	}
	if err := json.Unmarshal(aout[i:], &res); err != nil {
		t.Fatalf("ansible setup: %v\n%s", err, aout)
	}
	for _, n := range Names() {
		want, ok := res.Facts["ansible_"+n]
		if !ok {
			if _, has := got[n]; has && n != "distribution_minor_version" {
				t.Errorf("%s: Ansible has no such fact here, nodeconverge says %v", n, got[n])
			}
			continue
		}
		if f, isNum := want.(float64); isNum {
			want = int(f)
		}
		if n == "memfree_mb" || n == "swapfree_mb" {
			// Free memory moves between the two reads; it is the
			// same measure if it is close.
			g, _ := got[n].(int)
			if d := g - want.(int); d > 512 || d < -512 {
				t.Errorf("%s: nodeconverge %d, Ansible %d", n, g, want)
			}
			continue
		}
		if got[n] != want {
			t.Errorf("%s: nodeconverge %#v, Ansible %#v", n, got[n], want)
		}
	}
}

func TestParseDistributions(t *testing.T) {
	for _, c := range []struct {
		osr, debian                    string
		dist, fam, ver, major, release string
	}{
		{"ID=ubuntu\nVERSION_ID=\"24.04\"\nVERSION_CODENAME=noble\n", "trixie/sid\n", "Ubuntu", "Debian", "24.04", "24", "noble"},
		{"ID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n", "12.11\n", "Debian", "Debian", "12.11", "12", "bookworm"},
		{"ID=\"rocky\"\nVERSION_ID=\"9.4\"\nVERSION=\"9.4 (Blue Onyx)\"\n", "", "Rocky", "RedHat", "9.4", "9", "Blue Onyx"},
		{"ID=amzn\nVERSION_ID=\"2023\"\n", "", "Amazon", "RedHat", "2023", "2023", "NA"},
		{"ID=nixos\nVERSION_ID=\"24.05\"\n", "", "Nixos", "Nixos", "24.05", "24", "NA"},
	} {
		out := "@os\n" + c.osr + "@debian\n" + c.debian + "@uname\nLinux\nx86_64\n6.1.0\nnode1.lab\n#1 SMP\n@end\n"
		f, err := Parse([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		got := []any{f["distribution"], f["os_family"], f["distribution_version"], f["distribution_major_version"], f["distribution_release"], f["hostname"]}
		want := []any{c.dist, c.fam, c.ver, c.major, c.release, "node1"}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%q: got %v, want %v", c.osr, got, want)
				break
			}
		}
	}
	if _, err := Parse([]byte("@os\nID=debian\n")); err == nil {
		t.Error("an answer cut short parsed")
	}
}

func TestParseSubset(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, "distribution,hardware,platform"},
		{[]string{"all"}, "distribution,hardware,platform"},
		{[]string{"!hardware"}, "distribution,platform"},
		{[]string{"!all"}, "distribution,platform"},
		{[]string{"network"}, "distribution,platform"},
		{[]string{"!all", "hardware"}, "distribution,hardware,platform"},
		{[]string{"!all", "!min"}, ""},
		{[]string{"!all", "!min", "distribution"}, "distribution"},
	} {
		s, err := ParseSubset(c.in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range []string{Distribution, Hardware, Platform} {
			if s[n] {
				got = append(got, n)
			}
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("%v: got %v, want %s", c.in, got, c.want)
		}
	}
	if _, err := ParseSubset([]string{"hardwar"}); err == nil {
		t.Error("a misspelt subset was accepted")
	}
}
