package edit_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/modules/edit"
	"nodeconverge/modules/lineinfile"
)

func TestRegexpRefusesWhatRE2Cannot(t *testing.T) {
	for _, p := range []string{`foo(?=bar)`, `foo(?!bar)`, `(?<=a)b`, `(?<!a)b`, `(a)\1`, `(?P<x>a)(?P=x)`} {
		if _, err := edit.Regexp("regexp", p); err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("Regexp(%q) = %v, want refused saying why", p, err)
		}
	}
	for p, line := range map[string]string{`^a\Z`: "a", `[\]x]`: "]", `[]x]`: "]", `(?#note)b`: "b", `(?P<k>\w+)=`: "k=", `\d+\s*$`: "12  "} {
		re, err := edit.Regexp("regexp", p)
		if err != nil || !re.MatchString(line) {
			t.Errorf("Regexp(%q) = %v, %v; want one that matches %q", p, re, err, line)
		}
	}
	if !edit.Multiline(`(?m)^a$`) || edit.Multiline(`^a(?m)`) || edit.Multiline(`(?i)a`) {
		t.Error("Multiline reads only a leading (?m)")
	}
}

func TestExpandIsPythons(t *testing.T) {
	re := regexp.MustCompile(`^(?P<k>\w+)=(\w*)(x)?`)
	src := []byte("key=val")
	m := re.FindSubmatchIndex(src)
	for tpl, want := range map[string]string{
		`\1 \2`: "key val", `\g<k>:\g<2>`: "key:val", `[\3]`: "[]", `a\tb\\n`: "a\tb\\n", `\.`: `\.`, `\101`: "A", `\g<0>!`: "key=val!",
	} {
		got, err := edit.Expand(re, tpl, src, m)
		if err != nil || string(got) != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tpl, got, err, want)
		}
	}
	for _, bad := range []string{`\4`, `\g<nope>`, `\q`, `\g<1`} {
		if _, err := edit.Expand(re, bad, src, m); err == nil {
			t.Errorf("Expand(%q): want an error, as Python's", bad)
		}
	}
}

// TestPlanBackupDiffCheck: check mode plans the whole candidate (the diff
// is the plan's before/after) and writes nothing; apply writes it with a
// backup named by the old content, returned as `backup`; the second run
// plans nothing and leaves no second backup.
func TestPlanBackupDiffCheck(t *testing.T) {
	root := t.TempDir()
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
	p := filepath.Join(root, "modules")
	if err := os.WriteFile(p, []byte("br_netfilter\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	line := "overlay"
	a := &lineinfile.Args{Target: edit.Target{Path: p, Backup: true}, Line: &line}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan, err := lineinfile.Module{}.Check(ctx, transport.ReadOnly(h), a)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Files) != 2 || string(plan.Files[0].Before) != "br_netfilter\n" || string(plan.Files[0].After) != "br_netfilter\noverlay\n" {
		t.Fatalf("plan: %+v", plan.Files)
	}
	if b, _ := os.ReadFile(p); string(b) != "br_netfilter\n" {
		t.Fatalf("check wrote the file: %q", b)
	}
	backup, _ := plan.Vars["backup"].(string)
	if !strings.HasPrefix(backup, p+".") || plan.Vars["msg"] != "line added" {
		t.Fatalf("vars: %v", plan.Vars)
	}
	if _, err := (lineinfile.Module{}).Apply(ctx, h, plan); err != nil {
		t.Fatal(err)
	}
	h.Refresh()
	if b, _ := os.ReadFile(backup); string(b) != "br_netfilter\n" {
		t.Errorf("backup %s holds %q", backup, b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode after the edit: %v, want the file's own 0640 kept", fi.Mode())
	}
	again, err := lineinfile.Module{}.Check(ctx, transport.ReadOnly(h), a)
	if err != nil || again.Changed() {
		t.Fatalf("second run: %v %+v", err, again)
	}
	if m, _ := filepath.Glob(p + ".*~"); len(m) != 1 {
		t.Errorf("backups: %v, want exactly one", m)
	}
	var _ module.Module = lineinfile.Module{}
}

// TestValidateBlocksTheWrite: a candidate the validate command refuses is
// a validation error with its evidence, and the file is unchanged.
func TestValidateBlocksTheWrite(t *testing.T) {
	root := t.TempDir()
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
	p := filepath.Join(root, "sudoers")
	if err := os.WriteFile(p, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	line := "broken"
	a := &lineinfile.Args{Target: edit.Target{Path: p, Validate: "sh -c '! grep -q broken \"$0\"' %s"}, Line: &line}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := lineinfile.Module{}.Check(context.Background(), transport.ReadOnly(h), a)
	var ve *module.ValidationError
	if err == nil || !strings.Contains(err.Error(), "failed to validate") {
		t.Fatalf("check: %v", err)
	}
	if !errorsAs(err, &ve) || len(ve.Evidence) != 1 || ve.Evidence[0].OK {
		t.Errorf("evidence: %+v", ve)
	}
	if b, _ := os.ReadFile(p); string(b) != "a\n" {
		t.Errorf("file changed: %q", b)
	}
}

func errorsAs(err error, ve **module.ValidationError) bool {
	v, ok := err.(*module.ValidationError)
	*ve = v
	return ok
}
