package e2e

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/lab/labtest"
)

// mirrorConfigs are the public configs of the corpus that write registry
// mirrors (each with its SOURCE), with the URLs containerd's CRI tries for
// each namespace they mirror, read off the config by containerd's rules
// (registryEndpoints: endpoints in order, the namespace's default host
// appended unless an endpoint is on the namespace's own host).
var mirrorConfigs = map[string]map[string][]string{
	"gke-cos":                       {"docker.io": {"https://mirror.gcr.io", "https://registry-1.docker.io"}},
	"kind":                          {"k8s.gcr.io": {"https://registry.k8s.io", "https://k8s.gcr.io"}},
	"kubespray-v2-binaryname":       {"docker.io": {"https://registry-1.docker.io"}},
	"microk8s":                      {"docker.io": {"https://registry-1.docker.io"}, "localhost:32000": {"http://localhost:32000"}},
	"nvidia-toolkit-test-config-v1": {"docker.io": {"https://registry-1.docker.io"}},
	"nvidia-toolkit-test-config-v2": {"docker.io": {"https://registry-1.docker.io"}},
}

// criTries is the list of URLs containerd's CRI tries for namespace ns
// with registry.mirrors endpoints eps (internal/cri/server/images
// registryEndpoints, the same in 1.6, 1.7 and 2.x): a missing scheme is
// http on loopback, https elsewhere; the namespace's default host
// (registry-1.docker.io for docker.io) is appended unless an endpoint is on
// the namespace's own host. A URL named twice is one endpoint.
func criTries(ns string, eps []string) []string {
	var out []string
	own := false
	local := func(h string) bool {
		if x, _, err := net.SplitHostPort(h); err == nil {
			h = x
		}
		ip := net.ParseIP(h)
		return h == "localhost" || ip != nil && ip.IsLoopback()
	}
	for _, e := range eps {
		if !strings.Contains(e, "://") {
			h := strings.SplitN(e, "/", 2)[0]
			if local(h) {
				e = "http://" + e
			} else {
				e = "https://" + e
			}
		}
		if u, err := url.Parse(e); err == nil && u.Host == ns {
			own = true
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if !own {
		d := ns
		if ns == "docker.io" {
			d = "registry-1.docker.io"
		}
		scheme := "https"
		if local(d) {
			scheme = "http"
		}
		if !slices.Contains(out, scheme+"://"+d) {
			out = append(out, scheme+"://"+d)
		}
	}
	return out
}

var mirrorKey = regexp.MustCompile(`\.registry\.mirrors\.("[^"]+"|[^."]+)\.endpoint$`)

// mirrorsMoved reports, for a mirrors endpoint key of a node's dump that
// the run removed, whether containerd's own resolver says pulls of that
// namespace go to the same endpoints after the run, through the node's
// hosts.toml, as they went through the mirrors (eps: the cell's
// cellEndpoints).
func mirrorsMoved(eps map[string]string) func(key, before string) bool {
	return func(key, _ string) bool {
		m := mirrorKey.FindStringSubmatch(key)
		if m == nil {
			return false
		}
		d, ok := eps[strings.Trim(m[1], `"'`)]
		return ok && d == ""
	}
}

// hostsTries decodes a hosts.toml the way containerd's hosts loader orders
// it (core/remotes/docker/config: the [host] tables in file order, then the
// server): the URLs a pull tries.
func hostsTries(t *testing.T, b []byte) []string {
	t.Helper()
	out, err := decodeTries(b)
	if err != nil {
		t.Fatalf("hosts.toml does not decode: %v\n%s", err, b)
	}
	return out
}

func decodeTries(b []byte) ([]string, error) {
	var doc struct {
		Server string `toml:"server"`
	}
	if err := toml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var out []string
	for _, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSpace(ln)
		if strings.HasPrefix(ln, "[host.") {
			out = append(out, strings.Trim(strings.TrimSuffix(strings.TrimPrefix(ln, "[host."), "]"), `"'`))
		}
	}
	if doc.Server != "" {
		out = append(out, doc.Server)
	}
	return out, nil
}

// TestCRITries keeps the test's oracle honest: the expected tries of every
// mirror config are what containerd's rule makes of its endpoints.
func TestCRITries(t *testing.T) {
	for name, nss := range mirrorConfigs {
		b, err := os.ReadFile(filepath.Join(corpusDir, name, "config.toml"))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := toml.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		plugins, _ := doc["plugins"].(map[string]any)
		cri, _ := plugins["io.containerd.grpc.v1.cri"].(map[string]any)
		if cri == nil {
			cri, _ = plugins["cri"].(map[string]any)
		}
		reg, _ := cri["registry"].(map[string]any)
		mirrors, _ := reg["mirrors"].(map[string]any)
		if len(mirrors) != len(nss) {
			t.Errorf("%s: %d mirrors, the table lists %d", name, len(mirrors), len(nss))
		}
		for ns, want := range nss {
			m, _ := mirrors[ns].(map[string]any)
			var eps []string
			for _, e := range m["endpoint"].([]any) {
				eps = append(eps, e.(string))
			}
			if got := criTries(ns, eps); !slices.Equal(got, want) {
				t.Errorf("%s %s: criTries %v, table %v", name, ns, got, want)
			}
		}
	}
	if got := criTries("quay.io", []string{"mirror.lab", "localhost:5000"}); !slices.Equal(got, []string{"https://mirror.lab", "http://localhost:5000", "https://quay.io"}) {
		t.Errorf("schemes and default: %v", got)
	}
}

// TestMirrorsMigration runs the shipped playbook on every corpus config
// with mirrors, bare and with the incident's drop-ins, on containerd 1.6 and
// 2.x (issue 28 #1: these 44 of 50 runs were refused). Every cell must
// converge as the corpus matrix judges it (runtimes, declared settings,
// nothing else changed, rerun changes nothing, check = apply, and
// containerd's own resolver sends every mirrored registry's pulls to the
// same endpoints as the mirrors did), and after the run the node's dump has
// config_path and no mirrors and each namespace's hosts.toml makes
// containerd try the URLs the mirrors made it try, in the same order.
// kubespray-v2-binaryname's runc is /usr/local/bin/runc, where kubespray
// installs it; the cell's node has it (its lab-links).
func TestMirrorsMigration(t *testing.T) {
	var cfgs []corpusConfig
	for _, c := range loadCorpus(t) {
		if _, ok := mirrorConfigs[c.name]; ok {
			cfgs = append(cfgs, c)
		}
	}
	if len(cfgs) != len(mirrorConfigs) {
		t.Fatalf("corpus has %d of the %d configs with mirrors", len(cfgs), len(mirrorConfigs))
	}
	var sets []dropinSet
	for _, s := range dropinSets() {
		if s.name != "gpu-operator" {
			sets = append(sets, s)
		}
	}
	for _, g := range []struct {
		name string
		gen  labtest.Generation
	}{{"1.6", labtest.Containerd16}, {"2.x", labtest.Containerd2}} {
		t.Run("containerd-"+g.name, func(t *testing.T) {
			var cells []*cell
			for i, cfg := range cfgs {
				for _, set := range sets {
					cells = append(cells, &cell{cfg: cfg, set: set, gen: g.name, node: "m" + string(rune('a'+i)) + string(set.name[0])})
				}
			}
			l := runGeneration(t, g.gen, cells)
			for _, c := range cells {
				if c.outcome != "converged" {
					t.Errorf("%s: %s: %s", c.id(), c.outcome, c.detail)
					continue
				}
				for k, v := range c.after.dump {
					if strings.Contains(k, ".registry.mirrors.") {
						t.Errorf("%s: the dump still has %s = %s", c.id(), k, v)
					}
				}
				found := false
				for k, v := range c.after.dump {
					if strings.HasSuffix(k, ".registry.config_path") && strings.Trim(v, `"`) == "/etc/containerd/certs.d" {
						found = true
					}
				}
				if !found {
					t.Errorf("%s: config_path is not /etc/containerd/certs.d after the run", c.id())
				}
				for ns, want := range mirrorConfigs[c.cfg.name] {
					p := l.NodePath(c.node, filepath.Join("/etc/containerd/certs.d", ns, "hosts.toml"))
					b, err := os.ReadFile(p)
					if err != nil {
						t.Errorf("%s: %v", c.id(), err)
						continue
					}
					if got := hostsTries(t, b); !slices.Equal(got, want) {
						t.Errorf("%s: %s tries %v, the mirrors tried %v", c.id(), ns, got, want)
					}
					// The same by containerd's own code (a converged
					// cell has no difference; this says it was asked).
					if d, ok := c.endpoints[ns]; !ok || d != "" {
						t.Errorf("%s: containerd's resolver on %s: asked %t, %s", c.id(), ns, ok, d)
					}
				}
			}
		})
	}
}
