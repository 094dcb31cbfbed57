package containerdhosts

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// The CRI plugin's legacy registry settings (`registry.mirrors`,
// `registry.configs.<host>.tls`) and hosts.toml say the same things in two
// shapes. The rules below are containerd's own, read from
// internal/cri/server/images/image_pull.go (registryEndpoints, registryHosts,
// defaultScheme) and core/remotes/docker/config/hosts.go (ConfigureHosts,
// parseHostConfig) of containerd 2.4, which kept 1.6's and 1.7's behaviour:
//
//   - a mirror's endpoints are tried in order; an endpoint without a scheme
//     gets http for a loopback host, https otherwise;
//   - unless an endpoint's host is the namespace itself, the namespace's
//     default host is appended (registry-1.docker.io for docker.io);
//   - an endpoint without a path is the registry API at /v2; one with a path
//     is used as it is (hosts.toml says that with override_path = true);
//   - the TLS settings of `configs.<host>.tls` apply to every endpoint on
//     that host (hosts.toml spells them per host: skip_verify, ca);
//   - `mirrors."*"` is used for every namespace without mirrors of its own
//     (hosts.toml's `_default` directory), the namespace's default host
//     appended at pull time, as ConfigureHosts appends the server.
//
// hosts.toml tries its `[host]` tables in file order and the `server` last,
// so a legacy endpoint list L is hosts = L[:n-1], server = L[n-1].

// legacyTLS is one `configs.<host>.tls` table, as the dump shows it.
type legacyTLS struct {
	SkipVerify bool
	CAFile     string
	CertFile   string
	KeyFile    string
	// Source is the file (or "the live dump") it was read from, for messages.
	Source string
}

// defaultHost is containerd's docker.DefaultHost.
func defaultHost(ns string) string {
	if ns == "docker.io" {
		return "registry-1.docker.io"
	}
	return ns
}

// isLocalhost is containerd's docker.IsLocalhost.
func isLocalhost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func defaultScheme(host string) string {
	if isLocalhost(host) {
		return "http"
	}
	return "https"
}

// withScheme is containerd's addDefaultScheme.
func withScheme(endpoint string) (string, error) {
	if strings.Contains(endpoint, "://") {
		return endpoint, nil
	}
	u, err := url.Parse("dummy://" + endpoint)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	return defaultScheme(u.Host) + "://" + endpoint, nil
}

// legacyEndpoints is the list of URLs containerd's CRI tries for namespace
// ns with the mirror endpoints given ("*" for the wildcard: no default is
// appended, ConfigureHosts does that per namespace). A URL the list names
// twice is tried once: the second try is a retry of the same endpoint.
func legacyEndpoints(ns string, endpoints []string) ([]string, error) {
	var out []string
	hasNS := false
	for _, e := range endpoints {
		s, err := withScheme(e)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("endpoint %q: %w", e, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("endpoint %q is not an http(s) URL with a host", e)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("endpoint %q carries credentials, a query or a fragment, which a hosts.toml host cannot", e)
		}
		if u.Host == ns {
			hasNS = true
		}
		out = append(out, s)
	}
	if ns != "*" && !hasNS {
		dh := defaultHost(ns)
		out = append(out, defaultScheme(dh)+"://"+dh)
	}
	var dedup []string
	seen := map[string]bool{}
	for _, s := range out {
		if !seen[s] {
			seen[s] = true
			dedup = append(dedup, s)
		}
	}
	return dedup, nil
}

// dirOf is the certs.d directory name of a mirrors namespace.
func dirOf(ns string) string {
	if ns == "*" {
		return "_default"
	}
	return ns
}

// hostsFor is the hosts.toml meaning of a legacy endpoint list with the TLS
// settings per endpoint host.
func hostsFor(ns string, list []string, tls map[string]legacyTLS) (hostsFile, error) {
	var f hostsFile
	entry := func(s string) (hostEntry, error) {
		u, err := url.Parse(s)
		if err != nil {
			return hostEntry{}, fmt.Errorf("endpoint %q: %w", s, err)
		}
		h := hostEntry{URL: s, Capabilities: []string{"pull", "resolve"}, OverridePath: u.Path != ""}
		if t, ok := tls[u.Host]; ok {
			if t.CertFile != "" || t.KeyFile != "" {
				return h, fmt.Errorf("configs.%q.tls in %s sets a client certificate (cert_file/key_file): not migrated; move it into the hosts.toml's client setting by hand", u.Host, t.Source)
			}
			h.SkipVerify = t.SkipVerify
			if t.CAFile != "" {
				if !strings.HasPrefix(t.CAFile, "/") {
					return h, fmt.Errorf("configs.%q.tls.ca_file %q in %s is relative: containerd resolves it against its working directory, hosts.toml against the registry's directory", u.Host, t.CAFile, t.Source)
				}
				h.CA = []string{t.CAFile}
			}
		}
		return h, nil
	}
	hosts := list
	if ns != "*" {
		last, err := entry(list[len(list)-1])
		if err != nil {
			return f, err
		}
		f.Server, f.ServerSkipVerify, f.ServerCA, f.ServerOverridePath = last.URL, last.SkipVerify, last.CA, last.OverridePath
		hosts = list[:len(list)-1]
	}
	for _, s := range hosts {
		h, err := entry(s)
		if err != nil {
			return f, err
		}
		f.Hosts = append(f.Hosts, h)
	}
	return f, nil
}

// tries is the order of URLs a hosts file makes containerd try, for the
// read-back proof: hosts in order, then the server.
func (f hostsFile) tries() []string {
	var out []string
	for _, h := range f.Hosts {
		out = append(out, h.URL)
	}
	if f.Server != "" {
		out = append(out, f.Server)
	}
	return out
}
