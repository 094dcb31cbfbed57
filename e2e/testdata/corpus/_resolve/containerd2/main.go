// Command resolve prints, as JSON, where containerd 2.x's CRI image service
// sends a pull of each named registry, once with the registry settings of a
// "before" config dump (config_path cleared, so the legacy registry.mirrors
// and registry.configs decide) and once with those of an "after" dump whose
// config_path is pointed at a certs.d tree on this machine (the lab node's
// migrated hosts.toml files). The e2e test builds it (e2e/corpus_resolve_test.go, `go build
// -overlay`) inside the lab's containerd 2.x module (lab/containerd2), so the
// decoding is containerd's own: server config loading and plugin config
// decoding (cmd/containerd/server/config), the CRI image service's
// registryHosts (internal/cri/server/images) and the hosts.toml loader
// (core/remotes/docker/config).
//
//	resolve -before DUMP -after DUMP -certs DIR REGISTRY...
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"
	"unsafe"

	srvconfig "github.com/containerd/containerd/v2/cmd/containerd/server/config"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	criconfig "github.com/containerd/containerd/v2/internal/cri/config"
	"github.com/containerd/containerd/v2/internal/cri/server/images"
)

// endpoint is one host a pull tries, with what decides how it is reached.
type endpoint struct {
	URL        string   `json:"url"`
	Caps       []string `json:"caps"`
	SkipVerify bool     `json:"skip_verify"`
	// CA is a digest of the root CA subjects the client trusts; "" is the
	// system pool (no CA configured).
	CA          string `json:"ca"`
	ClientCerts int    `json:"client_certs"`
	// Fallback: the client tries https first and falls back to http
	// (docker.NewHTTPFallback, for an http host with TLS settings).
	Fallback bool `json:"http_fallback"`
}

func imageConfig(ctx context.Context, dump string) (criconfig.ImageConfig, error) {
	var c srvconfig.Config
	if err := srvconfig.LoadConfig(ctx, dump, &c); err != nil {
		return criconfig.ImageConfig{}, fmt.Errorf("load %s: %w", dump, err)
	}
	ic := criconfig.DefaultImageConfig()
	if _, err := c.Decode(ctx, "io.containerd.cri.v1.images", &ic); err != nil {
		return criconfig.ImageConfig{}, fmt.Errorf("decode the CRI image config of %s: %w", dump, err)
	}
	return ic, nil
}

func caps(c docker.HostCapabilities) []string {
	var out []string
	for _, n := range []struct {
		c    docker.HostCapabilities
		name string
	}{{docker.HostCapabilityPull, "pull"}, {docker.HostCapabilityResolve, "resolve"}, {docker.HostCapabilityPush, "push"}, {docker.HostCapabilityReferrers, "referrers"}} {
		if c&n.c != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

func describe(hosts []docker.RegistryHost) []endpoint {
	out := []endpoint{}
	for _, h := range hosts {
		e := endpoint{URL: h.Scheme + "://" + h.Host + h.Path, Caps: caps(h.Capabilities)}
		if h.Client != nil {
			rt := h.Client.Transport
			if _, ok := rt.(*http.Transport); !ok && rt != nil {
				rt, e.Fallback = unwrapFallback(rt)
			}
			if tr, ok := rt.(*http.Transport); ok && tr.TLSClientConfig != nil {
				e.SkipVerify = tr.TLSClientConfig.InsecureSkipVerify
				e.CA = poolDigest(tr.TLSClientConfig)
				e.ClientCerts = len(tr.TLSClientConfig.Certificates)
			}
		}
		out = append(out, e)
	}
	return out
}

// unwrapFallback returns the transport inside docker.NewHTTPFallback's
// round tripper (an unexported type holding it in its only field) and
// true; any other round tripper is returned as it is, with false.
func unwrapFallback(rt http.RoundTripper) (http.RoundTripper, bool) {
	v := reflect.ValueOf(rt)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct || !strings.Contains(v.Elem().Type().Name(), "allback") || v.Elem().NumField() < 1 {
		return rt, false
	}
	f := v.Elem().Field(0)
	inner, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(http.RoundTripper)
	if !ok {
		return rt, false
	}
	return inner, true
}

func poolDigest(c *tls.Config) string {
	if c.RootCAs == nil {
		return ""
	}
	//nolint:staticcheck // Subjects of a pool built here (system + files) is what tells two pools apart.
	subj := c.RootCAs.Subjects()
	ss := make([]string, len(subj))
	for i, s := range subj {
		ss[i] = string(s)
	}
	sort.Strings(ss)
	h := sha256.New()
	for _, s := range ss {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func main() {
	before := flag.String("before", "", "config dump whose legacy registry settings decide")
	after := flag.String("after", "", "config dump after the migration")
	certs := flag.String("certs", "", "the certs.d tree the after dump's config_path names, on this machine")
	flag.Parse()
	ctx := context.Background()
	bc, err := imageConfig(ctx, *before)
	if err != nil {
		fmt.Fprintln(os.Stderr, "resolve:", err)
		os.Exit(1)
	}
	ac, err := imageConfig(ctx, *after)
	if err != nil {
		fmt.Fprintln(os.Stderr, "resolve:", err)
		os.Exit(1)
	}
	bc.Registry.ConfigPath = ""
	ac.Registry.ConfigPath = *certs
	out := map[string]map[string]any{}
	for _, reg := range flag.Args() {
		r := map[string]any{}
		for side, cfg := range map[string]criconfig.ImageConfig{"before": bc, "after": ac} {
			hosts, err := images.NodeconvergeRegistryHosts(ctx, cfg)(reg)
			if err != nil {
				r[side+"_error"] = err.Error()
				continue
			}
			r[side] = describe(hosts)
		}
		out[reg] = r
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "resolve:", err)
		os.Exit(1)
	}
}
