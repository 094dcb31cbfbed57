package containerdhosts

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"
)

// TestLegacyEndpoints: the order containerd's CRI tries a mirror's
// endpoints in (registryEndpoints), and the hosts.toml that says the same.
func TestLegacyEndpoints(t *testing.T) {
	for _, c := range []struct {
		ns        string
		endpoints []string
		want      []string
		server    string
		override  bool
	}{
		// GKE: the mirror, then Docker Hub spelled out; the default is
		// the same URL, tried once.
		{"docker.io", []string{"https://mirror.gcr.io", "https://registry-1.docker.io"}, []string{"https://mirror.gcr.io", "https://registry-1.docker.io"}, "https://registry-1.docker.io", false},
		// kubespray, nvidia-ctk's tests: Docker Hub only.
		{"docker.io", []string{"https://registry-1.docker.io"}, []string{"https://registry-1.docker.io"}, "https://registry-1.docker.io", false},
		// kind: an endpoint on the namespace's own host stops the default
		// from being appended.
		{"k8s.gcr.io", []string{"https://registry.k8s.io", "https://k8s.gcr.io"}, []string{"https://registry.k8s.io", "https://k8s.gcr.io"}, "https://k8s.gcr.io", false},
		// microk8s: a loopback registry over http.
		{"localhost:32000", []string{"http://localhost:32000"}, []string{"http://localhost:32000"}, "http://localhost:32000", false},
		// No scheme: https, http on loopback; the default is appended.
		{"quay.io", []string{"mirror.lab:5000"}, []string{"https://mirror.lab:5000", "https://quay.io"}, "https://quay.io", false},
		{"127.0.0.1:5000", []string{"127.0.0.1:5001"}, []string{"http://127.0.0.1:5001", "http://127.0.0.1:5000"}, "http://127.0.0.1:5000", false},
		// A path is used as it is: override_path.
		{"ghcr.io", []string{"https://cache.lab/v2/ghcr"}, []string{"https://cache.lab/v2/ghcr", "https://ghcr.io"}, "https://ghcr.io", false},
		// The wildcard: no default (ConfigureHosts appends each
		// namespace's), no server.
		{"*", []string{"https://cache.lab"}, []string{"https://cache.lab"}, "", false},
	} {
		got, err := legacyEndpoints(c.ns, c.endpoints)
		if err != nil {
			t.Fatalf("%s %v: %v", c.ns, c.endpoints, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %v: tries %v, want %v", c.ns, c.endpoints, got, c.want)
		}
		f, err := hostsFor(c.ns, got, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.Server != c.server || !slices.Equal(f.tries(), c.want) {
			t.Errorf("%s: hosts.toml server %q tries %v, want %q %v", c.ns, f.Server, f.tries(), c.server, c.want)
		}
		back, un, err := parse(render(dirOf(c.ns), f))
		if err != nil || len(un) > 0 || !back.equal(f) {
			t.Errorf("%s: the hosts.toml does not read back: %v %v", c.ns, err, un)
		}
		for _, h := range f.Hosts {
			if u, _ := url.Parse(h.URL); h.OverridePath != (u.Path != "") {
				t.Errorf("%s: host %s override_path %v", c.ns, h.URL, h.OverridePath)
			}
		}
	}
	if _, err := legacyEndpoints("docker.io", []string{"https://u:p@mirror.lab"}); err == nil {
		t.Error("an endpoint with credentials was migrated")
	}
}

// migrateNode is a config tree in a temporary directory, measured with a
// real containerd through the local transport.
type migrateNode struct {
	t                 *testing.T
	dir, main, certs  string
	h                 *node.Host
	bin               string
	args              *Args
	configsDir, confd string
}

func newMigrateNode(t *testing.T, g labtest.Generation, main string, dropins map[string]string) *migrateNode {
	t.Helper()
	dir := t.TempDir()
	n := &migrateNode{t: t, dir: dir, main: filepath.Join(dir, "config.toml"), certs: filepath.Join(dir, "certs.d"), confd: filepath.Join(dir, "conf.d"), bin: labtest.Containerd(t, g)}
	if err := os.MkdirAll(n.confd, 0o755); err != nil {
		t.Fatal(err)
	}
	n.write(n.main, strings.ReplaceAll(main, "CONFD", n.confd))
	for name, body := range dropins {
		n.write(filepath.Join(n.confd, name), strings.ReplaceAll(body, "CERTS", n.certs))
	}
	n.h = node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(dir, "state"), RunID: "20260101T000000Z-test"})
	n.args = Module{}.NewArgs().(*Args)
	n.args.MigrateMirrors, n.args.Config, n.args.Containerd, n.args.CertsDir = true, n.main, n.bin, n.certs
	if err := n.args.Validate(); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *migrateNode) write(p, body string) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *migrateNode) check() (*module.Plan, error) {
	return Module{}.Check(context.Background(), transport.ReadOnly(n.h), n.args)
}

func (n *migrateNode) dump() *ctrconf.Effective {
	n.t.Helper()
	tree, err := ctrconf.Gather(context.Background(), transport.ReadOnly(n.h), n.main, n.bin)
	if err != nil {
		n.t.Fatal(err)
	}
	e, err := ctrconf.Dump(context.Background(), transport.ReadOnly(n.h), tree, nil)
	if err != nil || !e.OK {
		n.t.Fatalf("dump: %v %s", err, e.ErrLine())
	}
	return e
}

// corpusMirrors are the public configs with mirrors (e2e/testdata/corpus,
// each with its SOURCE) and the URLs containerd tries per namespace.
var corpusMirrors = map[string]map[string][]string{
	"gke-cos":                       {"docker.io": {"https://mirror.gcr.io", "https://registry-1.docker.io"}},
	"kind":                          {"k8s.gcr.io": {"https://registry.k8s.io", "https://k8s.gcr.io"}},
	"kubespray-v2-binaryname":       {"docker.io": {"https://registry-1.docker.io"}},
	"microk8s":                      {"docker.io": {"https://registry-1.docker.io"}, "localhost:32000": {"http://localhost:32000"}},
	"nvidia-toolkit-test-config-v1": {"docker.io": {"https://registry-1.docker.io"}},
	"nvidia-toolkit-test-config-v2": {"docker.io": {"https://registry-1.docker.io"}},
}

// TestMigrateCorpus migrates every corpus config with mirrors on containerd
// 1.6 and 2.x: each namespace's hosts.toml decodes to the URLs the mirrors
// made containerd try, the candidate's dump has config_path and no mirrors,
// only mirror lines left the file, and a second check plans nothing.
func TestMigrateCorpus(t *testing.T) {
	for _, g := range []labtest.Generation{labtest.Containerd16, labtest.Containerd2} {
		for name, want := range corpusMirrors {
			t.Run(string(g)+"/"+name, func(t *testing.T) {
				src, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "corpus", name, "config.toml"))
				if err != nil {
					t.Fatal(err)
				}
				n := newMigrateNode(t, g, string(src), nil)
				before := n.dump()
				plan, err := n.check()
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				var hostsFiles, edited []module.FileChange
				for _, fc := range plan.Files {
					if strings.HasSuffix(fc.Path, "/hosts.toml") {
						hostsFiles = append(hostsFiles, fc)
					} else {
						edited = append(edited, fc)
					}
				}
				if len(hostsFiles) != len(want) || len(edited) != 1 || edited[0].Path != n.main {
					t.Fatalf("plan files %+v", plan.Files)
				}
				for _, fc := range hostsFiles {
					ns := filepath.Base(filepath.Dir(fc.Path))
					f, un, err := parse(fc.After)
					if err != nil || len(un) > 0 {
						t.Fatalf("%s: %v %v", fc.Path, err, un)
					}
					if !slices.Equal(f.tries(), want[ns]) {
						t.Errorf("%s tries %v, want %v", ns, f.tries(), want[ns])
					}
				}
				// Only the mirrors' lines (and a config_path) changed.
				for _, ln := range removedLines(string(edited[0].Before), string(edited[0].After)) {
					if s := strings.TrimSpace(ln); s != "" && !strings.HasPrefix(s, "#") && !strings.Contains(s, "mirrors") && !strings.HasPrefix(s, "endpoint") {
						t.Errorf("removed a line that is not a mirror's: %q", ln)
					}
				}
				if _, err := (Module{}).Apply(context.Background(), n.h, plan); err != nil {
					t.Fatal(err)
				}
				after := n.dump()
				if cp := effectiveConfigPath(after); cp != n.certs {
					t.Errorf("config_path after = %q", cp)
				}
				for _, reg := range effectiveRegistry(after) {
					if len(sub(reg, "mirrors")) > 0 {
						t.Errorf("mirrors still loaded: %v", sub(reg, "mirrors"))
					}
				}
				for _, c := range ctrconf.Diff(before, after) {
					if !legacyKey(c.Key) && !ctrconf.NotASetting(c.Key) {
						t.Errorf("changed %s: %s -> %s", c.Key, c.Before, c.After)
					}
				}
				again, err := n.check()
				if err != nil || again.Changed() {
					t.Fatalf("second check: %v %+v", err, again)
				}
			})
		}
	}
}

// removedLines are the lines of a that b does not have (as a multiset).
func removedLines(a, b string) []string {
	have := map[string]int{}
	for _, l := range strings.Split(b, "\n") {
		have[l]++
	}
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if have[l] > 0 {
			have[l]--
			continue
		}
		out = append(out, l)
	}
	return out
}

const tlsMain = `version = 2
imports = ["CONFD/*.toml"]

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  # the lab's registries
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."harbor.lab"]
    endpoint = ["https://harbor.lab:8443"]
  [plugins."io.containerd.grpc.v1.cri".registry.configs."harbor.lab:8443".tls]
    insecure_skip_verify = true
  [plugins."io.containerd.grpc.v1.cri".registry.configs."harbor.lab:8443".auth]
    username = "robot"
    password = "s3cr3t-pw"
  [plugins."io.containerd.grpc.v1.cri".registry.configs."quay.lab".tls]
    ca_file = "/etc/ssl/quay-ca.pem"
`

// TestMigrateTLS (containerd 1.6): configs.<host>.tls becomes the hosts'
// skip_verify and ca, a TLS table for a host no mirror names becomes its
// namespace's server settings, and auth stays where the CRI reads it.
func TestMigrateTLS(t *testing.T) {
	n := newMigrateNode(t, labtest.Containerd16, tlsMain, nil)
	plan, err := n.check()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hostsFile{}
	var main module.FileChange
	for _, fc := range plan.Files {
		if strings.HasSuffix(fc.Path, "/hosts.toml") {
			f, _, err := parse(fc.After)
			if err != nil {
				t.Fatal(err)
			}
			got[filepath.Base(filepath.Dir(fc.Path))] = f
		} else {
			main = fc
		}
	}
	h := got["harbor.lab"]
	if len(h.Hosts) != 1 || h.Hosts[0].URL != "https://harbor.lab:8443" || !h.Hosts[0].SkipVerify || h.Server != "https://harbor.lab" {
		t.Errorf("harbor.lab: %+v", h)
	}
	q := got["quay.lab"]
	if q.Server != "https://quay.lab" || !slices.Equal(q.ServerCA, []string{"/etc/ssl/quay-ca.pem"}) || len(q.Hosts) != 0 {
		t.Errorf("quay.lab: %+v", q)
	}
	after := string(main.After)
	if !strings.Contains(after, `password = "s3cr3t-pw"`) || strings.Contains(after, "tls]") || strings.Contains(after, "mirrors") {
		t.Errorf("main after:\n%s", after)
	}
	if !strings.Contains(after, "config_path") {
		t.Errorf("no config_path written:\n%s", after)
	}
	if _, err := (Module{}).Apply(context.Background(), n.h, plan); err != nil {
		t.Fatal(err)
	}
	if c := ctrconf.RegistryConflict(n.dump()); c != "" {
		t.Errorf("after: %s", c)
	}
}

// TestMigrateExistingHosts: an operator's hosts.toml that says the same is
// kept; one that says otherwise refuses the run, naming both; nothing is
// ever overwritten.
func TestMigrateExistingHosts(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "corpus", "gke-cos", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	n := newMigrateNode(t, labtest.Containerd16, string(src), nil)
	hosts := filepath.Join(n.certs, "docker.io", "hosts.toml")
	n.write(hosts, "server = \"https://registry-1.docker.io\"\n[host.\"https://other.mirror\"]\n  capabilities = [\"pull\", \"resolve\"]\n")
	_, err = n.check()
	if err == nil || !strings.Contains(err.Error(), hosts+" already exists") || !strings.Contains(err.Error(), "https://other.mirror") || !strings.Contains(err.Error(), "https://mirror.gcr.io") {
		t.Fatalf("conflicting hosts.toml: %v", err)
	}
	same := "# the operator's\nserver = \"https://registry-1.docker.io\"\n\n[host.'https://mirror.gcr.io']\ncapabilities = ['resolve', 'pull']\n"
	n.write(hosts, same)
	// A new connection: a host's reads are cached for its run.
	n.h = node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(n.dir, "state2"), RunID: "20260101T000001Z-test"})
	plan, err := n.check()
	if err != nil {
		t.Fatal(err)
	}
	for _, fc := range plan.Files {
		if fc.Path == hosts {
			t.Fatalf("the operator's hosts.toml is rewritten: %+v", fc)
		}
	}
	if len(plan.Files) != 1 {
		t.Fatalf("plan %+v", plan.Files)
	}
}
