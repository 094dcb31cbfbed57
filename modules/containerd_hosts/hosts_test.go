package containerdhosts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
)

func newHost(t *testing.T) (*node.Host, string) {
	t.Helper()
	root := t.TempDir()
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
	return h, filepath.Join(root, "etc", "containerd", "certs.d")
}

func labArgs(certs string) *Args {
	a := Module{}.NewArgs().(*Args)
	a.Registry, a.CertsDir, a.Server = "harbor.lab:80", certs, "http://harbor.lab:80"
	a.Hosts = []Host{{URL: "http://harbor.lab:80", Capabilities: []string{"resolve", "pull"}, SkipVerify: true}}
	return a
}

func apply(t *testing.T, h *node.Host, p *module.Plan) {
	t.Helper()
	if _, err := (Module{}).Apply(context.Background(), h, p); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func check(t *testing.T, h *node.Host, a *Args) (*module.Plan, error) {
	t.Helper()
	if err := a.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	return Module{}.Check(context.Background(), transport.ReadOnly(h), a)
}

// TestConvergeAndIdempotent: the file is created, reads back as asked, and
// the second check plans nothing.
func TestConvergeAndIdempotent(t *testing.T) {
	h, certs := newHost(t)
	a := labArgs(certs)
	plan, err := check(t, h, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Files) != 1 || plan.Files[0].Action != module.Create || plan.Files[0].Path != filepath.Join(certs, "harbor.lab:80", "hosts.toml") {
		t.Fatalf("plan = %+v", plan.Files)
	}
	apply(t, h, plan)
	b, err := os.ReadFile(a.File())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`server = "http://harbor.lab:80"`, `[host."http://harbor.lab:80"]`, `capabilities = ["pull", "resolve"]`, `skip_verify = true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("file lacks %s:\n%s", want, b)
		}
	}
	again, err := check(t, h, a)
	if err != nil || again.Changed() {
		t.Fatalf("second check: %v %+v", err, again)
	}
}

// TestSameMeaningLeftAlone: a hand-written file that says the same in
// another order and spelling (ca as one string, capabilities unsorted) is
// not rewritten; one that differs in a host's order is (containerd tries
// hosts in file order).
func TestSameMeaningLeftAlone(t *testing.T) {
	h, certs := newHost(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := labArgs(certs)
	a.Hosts = []Host{{URL: "https://mirror.lab", Capabilities: []string{"pull"}, CA: []string{ca}}, {URL: "http://harbor.lab:80"}}
	hand := "server = 'http://harbor.lab:80'\n" +
		"[host.\"https://mirror.lab\"]\n  ca = \"" + ca + "\"\n  capabilities = ['pull']\n\n" +
		"[host.'http://harbor.lab:80']\n  capabilities = ['resolve', 'pull']\n"
	if err := os.MkdirAll(filepath.Dir(a.File()), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.File(), []byte(hand), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := check(t, h, a)
	if err != nil || plan.Changed() {
		t.Fatalf("same meaning: %v %+v", err, plan)
	}
	a.Hosts[0], a.Hosts[1] = a.Hosts[1], a.Hosts[0]
	plan, err = check(t, h, a)
	if err != nil || !plan.Changed() {
		t.Fatalf("hosts reordered: %v, plan %+v, want an update", err, plan)
	}
}

// TestMissingCARefused: a ca file that is not on the node is refused before
// anything is written.
func TestMissingCARefused(t *testing.T) {
	h, certs := newHost(t)
	a := labArgs(certs)
	a.Hosts[0].CA = []string{"/nonexistent/ca.pem"}
	_, err := check(t, h, a)
	var ve *module.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Msg, "/nonexistent/ca.pem") {
		t.Fatalf("check = %v, want a refusal naming the ca file", err)
	}
	if _, err := os.Stat(a.File()); !os.IsNotExist(err) {
		t.Fatalf("file written: %v", err)
	}
}

// TestAbsentRemoves: state absent removes the file and a rerun is clean.
func TestAbsentRemoves(t *testing.T) {
	h, certs := newHost(t)
	a := labArgs(certs)
	plan, err := check(t, h, a)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, h, plan)
	a.State = "absent"
	plan, err = check(t, h, a)
	if err != nil || len(plan.Files) != 1 || plan.Files[0].Action != module.Delete {
		t.Fatalf("absent: %v %+v", err, plan)
	}
	apply(t, h, plan)
	if _, err := os.Stat(a.File()); !os.IsNotExist(err) {
		t.Fatalf("file still there: %v", err)
	}
	if plan, err := check(t, h, a); err != nil || plan.Changed() {
		t.Fatalf("rerun: %v %+v", err, plan)
	}
}

// TestBadArgumentsAtLoad: a playbook with a certs_dir that is not a certs.d
// directory, an unknown capability or a URL without a scheme fails to load
// with the playbook's file:line:col (the task's) and what is wrong.
func TestBadArgumentsAtLoad(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"certs_dir: /etc/containerd/conf.d", "not a certs.d directory"},
		{"certs_dir: /etc/containerd/../containerd/certs.d", "clean absolute path"},
		{"hosts: [{url: harbor.lab:80}]", "must start with http:// or https://"},
		{"hosts: [{url: 'http://h', capabilities: [pull, delete]}]", `"delete" is not one of`},
		{"hosts: [{url: 'http://h', ca: [relative.pem]}]", "absolute path"},
		{"registry: ../etc", "not a host namespace"},
	} {
		dir := t.TempDir()
		pb := filepath.Join(dir, "play.yaml")
		body := "- hosts: all\n  tasks:\n    - name: registry\n      containerd_hosts:\n        registry: harbor.lab\n        server: http://harbor.lab\n        " + c.arg + "\n"
		if strings.HasPrefix(c.arg, "registry:") {
			body = strings.Replace(body, "        registry: harbor.lab\n", "", 1)
		}
		if err := os.WriteFile(pb, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := playbook.Load(pb)
		if err == nil || !strings.Contains(err.Error(), pb+":3:") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Load = %v, want %s:3:... %s", c.arg, err, pb, c.want)
		}
	}
}
