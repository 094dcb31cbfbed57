package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"
)

// Where a pull goes, asked of containerd itself (issue 28's acceptance:
// "pulls resolve to the same endpoints as before"). The resolver is a small
// program (testdata/corpus/_resolve/<lab module>/main.go) built inside the
// lab's own containerd module, with one extra file compiled into the CRI
// package (export.go) that exports the CRI plugin's unexported
// registryHosts. It loads two config dumps with containerd's server config
// loader and plugin config decoder and asks registryHosts for each
// registry's ordered endpoint list: with the "before" dump's config_path
// cleared, the legacy registry.mirrors and registry.configs decide (the CRI
// code for legacy mirrors); with the "after" dump's config_path pointed at
// a lab node's certs.d, the hosts.toml files decide (config.ConfigureHosts
// with the CRI plugin's HostDirFromRoot). Nothing of it is nodeconverge's
// reading of either format.
//
// 1.6 is Debian's binary, whose source is not in the module cache; its
// cells are resolved by containerd 1.7's code. The legacy mirrors code is
// the same on both lines: pkg/cri/server/image_pull.go's registryHosts,
// registryEndpoints and getTLSConfig at containerd/containerd
// 00d102da9f73110bf9e79f9139d10ee2f249effb, a revision before 1.7, differ
// from 1.7.35's only in calling a local isLocalHost where 1.7 calls
// docker.IsLocalhost (the same test).

// resolverModule is the lab module whose containerd resolves for a
// generation.
func resolverModule(gen string) string {
	if gen == string(labtest.Containerd2) {
		return "containerd2"
	}
	return "containerd17"
}

var (
	resolverMu    sync.Mutex
	resolverBuilt = map[string]string{}
)

// resolverBin builds (once per test binary and module, under the calling
// test's temporary directory, rebuilt if that is gone) the resolver for
// generation gen. The containerd module is the lab module's dependency,
// used through a symbolic link named in a replace directive, because `go
// build -overlay` refuses to add files beneath GOMODCACHE; GOPROXY=off: the
// lab's builds already fetched everything it needs.
func resolverBin(t *testing.T, gen string) string {
	t.Helper()
	mod := resolverModule(gen)
	resolverMu.Lock()
	defer resolverMu.Unlock()
	if p, ok := resolverBuilt[mod]; ok {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	labMod := filepath.Join(labtest.RepoRoot(), "lab", mod)
	gomod, err := os.ReadFile(filepath.Join(labMod, "go.mod"))
	if err != nil {
		t.Fatalf("resolver: %v", err)
	}
	req := regexp.MustCompile(`(?m)^require (github\.com/containerd/containerd(?:/v2)?) (v\S+)$`).FindSubmatch(gomod)
	if req == nil {
		t.Fatalf("resolver: lab/%s/go.mod has no single-line require of containerd", mod)
	}
	ctrdPath := string(req[1])
	goCmd := func(dir string, args ...string) (string, error) {
		c := exec.Command("go", args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOPROXY=off", "GOWORK=off")
		out, err := c.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	src, err := goCmd(labMod, "list", "-m", "-f", "{{.Dir}}", ctrdPath)
	if err != nil || src == "" {
		t.Fatalf("resolver: where is %s of lab/%s: %v\n%s", ctrdPath, mod, err, src)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "containerd")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	build := filepath.Join(dir, "mod")
	if err := os.Mkdir(build, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(gomod, []byte("module nodeconverge/resolve"))
	gomod = append(gomod, fmt.Sprintf("\nreplace %s => %s\n", ctrdPath, link)...)
	sum, err := os.ReadFile(filepath.Join(labMod, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": gomod, "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(build, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	here, err := filepath.Abs(filepath.Join(corpusDir, "_resolve", mod))
	if err != nil {
		t.Fatal(err)
	}
	criPkg := map[string]string{"containerd2": "internal/cri/server/images", "containerd17": "pkg/cri/server"}[mod]
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(link, criPkg, "zz_nodeconverge_export.go"):      filepath.Join(here, "export.go"),
		filepath.Join(link, "cmd", "nodeconverge-resolve", "main.go"): filepath.Join(here, "main.go"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "resolve")
	if out, err := goCmd(build, "build", "-mod=mod", "-trimpath", "-overlay", ov, "-o", bin, ctrdPath+"/cmd/nodeconverge-resolve"); err != nil {
		t.Fatalf("resolver: build in lab/%s's containerd: %v\n%s", mod, err, out)
	}
	resolverBuilt[mod] = bin
	return bin
}

// resolvedHost is one endpoint a pull tries, as the resolver prints it.
type resolvedHost struct {
	URL         string   `json:"url"`
	Caps        []string `json:"caps"`
	SkipVerify  bool     `json:"skip_verify"`
	CA          string   `json:"ca"`
	ClientCerts int      `json:"client_certs"`
	Fallback    bool     `json:"http_fallback"`
}

// resolvedRegistry is one registry's endpoints before and after.
type resolvedRegistry struct {
	Before      []resolvedHost `json:"before"`
	After       []resolvedHost `json:"after"`
	BeforeError string         `json:"before_error"`
	AfterError  string         `json:"after_error"`
}

// pullView is what of a registry's endpoint list a CRI pull depends on:
// the endpoints in order, each with whether it resolves tags and serves
// blobs (a CRI pull never pushes, and no CRI code asks for referrers, so
// those two capabilities are not compared), and how its TLS is set up
// where it speaks TLS (a plain http endpoint's TLS settings do nothing). An
// endpoint that repeats an earlier one is dropped: the legacy code appends
// docker.io's default host even when a mirror names registry-1.docker.io
// (it compares with the namespace, not with its default host), and trying
// the same endpoint a second time after it failed reaches nothing new.
func pullView(hs []resolvedHost) []string {
	var out []string
	for _, h := range hs {
		var caps []string
		for _, c := range h.Caps {
			if c == "pull" || c == "resolve" {
				caps = append(caps, c)
			}
		}
		sort.Strings(caps)
		s := fmt.Sprintf("%s [%s]", h.URL, strings.Join(caps, ","))
		switch {
		case h.Fallback:
			s += fmt.Sprintf(" skip_verify=%t ca=%s client_certs=%d, falling back to http", h.SkipVerify, orDash(h.CA), h.ClientCerts)
		case strings.HasPrefix(h.URL, "https://"):
			s += fmt.Sprintf(" skip_verify=%t ca=%s client_certs=%d", h.SkipVerify, orDash(h.CA), h.ClientCerts)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// differs says how a registry's endpoints changed, "" when a pull goes to
// the same places in the same order.
func (r resolvedRegistry) differs() string {
	if r.BeforeError != "" || r.AfterError != "" {
		return fmt.Sprintf("before: %s; after: %s", orDash(r.BeforeError), orDash(r.AfterError))
	}
	b, a := pullView(r.Before), pullView(r.After)
	if slices.Equal(b, a) {
		return ""
	}
	return fmt.Sprintf("before %q, after %q", b, a)
}

// probeRegistries are asked on every cell besides the mirrored ones: a
// registry nobody mirrors must still go to itself (a stray `_default`, a
// lost `*` mirror), docker.io to its default host. No loopback registry is
// probed: for one nobody mirrors, containerd's hosts.toml default (tried
// whenever config_path is set, which the shipped playbook declares for
// every config) is https first with a fallback to http, where the legacy
// code goes to http at once; that is config_path's rule, not the
// migration's, and holds for configs without mirrors alike.
var probeRegistries = []string{"docker.io", "registry.k8s.io", "quay.io"}

var importsLine = regexp.MustCompile(`(?m)^imports = .*$`)

// writeDump writes a config dump for the resolver: the dump is already
// merged, so its imports list (kept by containerd in the dump) is dropped
// lest the loader read the files a second time, from this machine.
func writeDump(t *testing.T, dir, name, dump string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, importsLine.ReplaceAll([]byte(dump), nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// localDump is `containerd config dump` of one config file, by the
// generation's own binary on this machine: the registry settings as that
// containerd reads the file.
func localDump(t *testing.T, gen labtest.Generation, cfg string) (string, error) {
	t.Helper()
	c := exec.Command(labtest.Containerd(t, gen), "--config", cfg, "config", "dump")
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("containerd %s config dump %s: %w: %s", gen, cfg, err, stderr.String())
	}
	return string(out), nil
}

// mirroredNamespaces are the registries a dump's registry.mirrors name.
func mirroredNamespaces(dump string) ([]string, error) {
	var m map[string]any
	if err := toml.Unmarshal([]byte(dump), &m); err != nil {
		return nil, fmt.Errorf("dump does not parse: %w", err)
	}
	var out []string
	for k := range ctrconf.Flatten(m) {
		if mm := mirrorKey.FindStringSubmatch(k); mm != nil {
			if ns := strings.Trim(mm[1], `"'`); !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// resolve asks the resolver of gen where pulls of regs go with the legacy
// settings of the dump before and with the hosts.toml files of certs under
// the dump after.
func resolve(t *testing.T, gen string, before, after, certs string, regs []string) (map[string]resolvedRegistry, error) {
	t.Helper()
	bin := resolverBin(t, gen)
	dir := t.TempDir()
	args := append([]string{"-before", writeDump(t, dir, "before.toml", before), "-after", writeDump(t, dir, "after.toml", after), "-certs", certs}, regs...)
	c := exec.Command(bin, args...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("resolver: %w: %s", err, stderr.String())
	}
	var res map[string]resolvedRegistry
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("resolver output: %w\n%s", err, out)
	}
	return res, nil
}

// cellEndpoints resolves a converged cell of a config with mirrors: the
// registry settings before are the config file's own as the generation's
// containerd reads it alone (in the drop-in scenarios on 1.x the drop-ins
// shadow them before the run, which the run repairs; on 2.x with the
// incident's drop-in the CRI plugin refuses them together with its
// config_path; either way they are what the operator wrote), after the run
// the node's dump and its certs.d. It returns, per registry asked, how its
// endpoints changed ("" for not at all); nil for a config without mirrors.
// A hosts.toml's ca, client and key paths are read on this machine, not
// the node's: none of the corpus's mirrors configs has TLS settings, and a
// file missing here fails the cell loudly (changed-endpoints), never
// silently.
func cellEndpoints(t *testing.T, l *labtest.Lab, c *cell) (map[string]string, error) {
	t.Helper()
	gen := labtest.Generation(c.gen)
	before, err := localDump(t, gen, filepath.Join(c.cfg.dir, "config.toml"))
	if err != nil {
		return nil, err
	}
	nss, err := mirroredNamespaces(before)
	if err != nil || len(nss) == 0 {
		return nil, err
	}
	regs := append([]string{}, nss...)
	for _, p := range probeRegistries {
		if !slices.Contains(regs, p) {
			regs = append(regs, p)
		}
	}
	res, err := resolve(t, c.gen, before, c.after.raw, l.NodePath(c.node, "/etc/containerd/certs.d"), regs)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range regs {
		rr, ok := res[r]
		if !ok {
			return nil, fmt.Errorf("resolver said nothing of %s", r)
		}
		out[r] = rr.differs()
		if slices.Contains(nss, r) && out[r] == "" {
			t.Logf("%s: pulls of %s go to %q, before and after", c.id(), r, pullView(rr.After))
		}
	}
	return out, nil
}

// TestResolverSeesDifferences keeps the comparison honest without a lab:
// on gke-cos's mirrors, containerd's own resolvers agree with a hosts.toml
// of the same meaning and disagree with one that swaps the order, one that
// skips verification and one that sends docker.io elsewhere, on 1.7's and
// 2.x's code.
func TestResolverSeesDifferences(t *testing.T) {
	cfg := filepath.Join(corpusDir, "gke-cos", "config.toml")
	same := "server = \"https://registry-1.docker.io\"\n\n[host.\"https://mirror.gcr.io\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	cases := []struct {
		name, hosts string
		differs     bool
	}{
		{"same", same, false},
		{"swapped", "server = \"https://mirror.gcr.io\"\n\n[host.\"https://registry-1.docker.io\"]\n  capabilities = [\"pull\", \"resolve\"]\n", true},
		{"skip-verify", strings.Replace(same, "capabilities", "skip_verify = true\n  capabilities", 1), true},
		{"elsewhere", strings.Replace(same, "mirror.gcr.io", "mirror.example.com", 1), true},
		{"no-mirror", "server = \"https://registry-1.docker.io\"\n", true},
	}
	for _, g := range []labtest.Generation{labtest.Containerd17, labtest.Containerd2} {
		t.Run(string(g), func(t *testing.T) {
			before, err := localDump(t, g, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if nss, err := mirroredNamespaces(before); err != nil || !slices.Equal(nss, []string{"docker.io"}) {
				t.Fatalf("gke-cos mirrors %v (%v), want docker.io", nss, err)
			}
			// The after side's dump may as well be the same: with
			// config_path set (the resolver points it at certs), the
			// CRI code reads hosts.toml only, mirrors or not.
			after := before
			for _, c := range cases {
				certs := t.TempDir()
				if err := os.MkdirAll(filepath.Join(certs, "docker.io"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(certs, "docker.io", "hosts.toml"), []byte(c.hosts), 0o644); err != nil {
					t.Fatal(err)
				}
				res, err := resolve(t, string(g), before, after, certs, append([]string{}, probeRegistries...))
				if err != nil {
					t.Fatal(err)
				}
				if d := res["docker.io"].differs(); (d != "") != c.differs {
					t.Errorf("%s: differs %q, want a difference: %t", c.name, d, c.differs)
				}
				for _, p := range probeRegistries[1:] {
					if d := res[p].differs(); d != "" {
						t.Errorf("%s: %s is not mirrored, yet %s", c.name, p, d)
					}
				}
			}
		})
	}
}
