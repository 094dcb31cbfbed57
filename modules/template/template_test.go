package template_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/modules/template"
)

func setup(t *testing.T, body string) (string, *node.Host) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "templates", "k.conf.j2"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
}

// TestRenderAndValidate: src (found under templates/ beside the playbook)
// renders with the host's variables and Ansible's trim_blocks; validate
// runs on the candidate and a failing one blocks the write.
func TestRenderAndValidate(t *testing.T) {
	root, h := setup(t, "# {{ inventory_hostname }}\n{% for m in modules %}\n{{ m }}\n{% endfor %}\nhostile={{ hostile }}\n")
	dest := filepath.Join(root, "out", "k.conf")
	a := &template.Args{Src: "k.conf.j2", Dest: dest, ValidateCmd: "grep -q overlay %s"}
	a.SetBaseDir(root)
	a.SetVars(map[string]any{"inventory_hostname": "gpu1", "modules": []any{"overlay", "br_netfilter"}, "hostile": "{{ x }}$(id)"})
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	want := "# gpu1\noverlay\nbr_netfilter\nhostile={{ x }}$(id)\n"
	if *a.Content != want {
		t.Errorf("rendered %q, want %q", *a.Content, want)
	}
	plan, err := template.Module{}.Check(context.Background(), transport.ReadOnly(h), a)
	if err != nil || len(plan.Files) != 1 || plan.Files[0].Action != module.Create || len(plan.Evidence) != 1 || !plan.Evidence[0].OK {
		t.Fatalf("check: %+v %v", plan, err)
	}
	if _, err := (template.Module{}).Apply(context.Background(), h, plan); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dest); string(b) != want {
		t.Errorf("dest holds %q", b)
	}

	bad := &template.Args{Src: "k.conf.j2", Dest: filepath.Join(root, "out", "other.conf"), ValidateCmd: "grep -q nvidia %s"}
	bad.SetBaseDir(root)
	bad.SetVars(map[string]any{"inventory_hostname": "gpu1", "modules": []any{"overlay"}, "hostile": ""})
	if err := bad.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err = template.Module{}.Check(context.Background(), transport.ReadOnly(h), bad)
	var ve *module.ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("a failing validate: err = %v, want a ValidationError", err)
	}
}

func TestLoadTimeErrors(t *testing.T) {
	root, _ := setup(t, "{{ x | lowre }}\n")
	a := &template.Args{Src: "k.conf.j2", Dest: "/etc/k.conf"}
	a.SetBaseDir(root)
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "k.conf.j2") || !strings.Contains(err.Error(), `unknown filter "lowre"`) {
		t.Errorf("unknown filter: %v", err)
	}
	a = &template.Args{Src: "missing.j2", Dest: "/etc/k.conf"}
	a.SetBaseDir(root)
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "missing.j2") {
		t.Errorf("missing src: %v", err)
	}
	root, _ = setup(t, "{{ nope }}\n")
	a = &template.Args{Src: "k.conf.j2", Dest: "/etc/k.conf"}
	a.SetBaseDir(root)
	a.SetVars(map[string]any{})
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), `undefined variable "nope"`) {
		t.Errorf("undefined: %v", err)
	}
}
