package playbook

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKeyValueArgs: a module's arguments written as one key=value string
// (Ansible's older form, folded blocks too) load as the mapping Ansible's
// parse_kv gives, quoted values unquoted and {{ }} kept whole; a free-form
// command stays the command; a word without = is refused at its line.
func TestKeyValueArgs(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - copy_t: dest=/etc/sysctl.d/custom.conf mode=0644 backup=no
    - copy_t: >
        dest={{ base }}/{{ item.key }}.conf
        content="{{ item.key }} = {{ item.value }}"
        mode='0600'
      loop: [1]
    - command_t: echo a=b
`)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(i int) copyArgs {
		var a copyArgs
		if err := plays[0].Tasks[i].Args.Decode(&a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	if got, want := decode(0), (copyArgs{Dest: "/etc/sysctl.d/custom.conf", Mode: "0644", Backup: false}); !cmp.Equal(got, want, cmp.AllowUnexported(copyArgs{})) {
		t.Errorf("plain key=value: %+v, want %+v", got, want)
	}
	if got, want := decode(1), (copyArgs{Dest: "{{ base }}/{{ item.key }}.conf", Content: "{{ item.key }} = {{ item.value }}", Mode: "0600"}); !cmp.Equal(got, want, cmp.AllowUnexported(copyArgs{})) {
		t.Errorf("folded key=value: %+v, want %+v", got, want)
	}
	var c commandArgs
	if err := plays[0].Tasks[2].Args.Decode(&c); err != nil || c.Cmd != "echo a=b" {
		t.Errorf("free-form command: %+v, %v", c, err)
	}
	_, err = loadText(t, "- hosts: all\n  tasks:\n    - name: bad\n      copy_t: dest=/x oops\n")
	if err == nil || !strings.Contains(err.Error(), `"oops" is not one`) || !strings.Contains(err.Error(), ":4:15:") {
		t.Errorf("a word without =: %v", err)
	}
	for in, want := range map[string][]string{
		`a=1 b="x y" c={{ d | default('p q') }}`: {"a=1", `b="x y"`, "c={{ d | default('p q') }}"},
		"a=1\n  b=2\n":                           {"a=1", "b=2"},
		`a='it''s' b=\"`:                         {`a='it''s'`, `b=\"`},
	} {
		if got := splitKV(in); !cmp.Equal(got, want) {
			t.Errorf("splitKV(%q) = %q, want %q", in, got, want)
		}
	}
}
