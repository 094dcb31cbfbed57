// Package containerdhosts is the `containerd_hosts` module: one registry's
// host configuration in `<certs_dir>/<registry>/hosts.toml`, the way
// containerd documents it (docs/hosts.md: `server`, `[host."<url>"]` with
// `capabilities`, `skip_verify`, `ca`, `override_path`). It exists because the
// incident's registry fix was a CRI drop-in (`registry.config_path` in
// conf.d/zz-labhub-registry.toml) that shadowed the whole CRI table on
// containerd 1.x: a registry's settings belong in its hosts.toml, which no
// other file can shadow, and `config_path` belongs to the settings the main
// config already owns.
//
// The module owns the file whole and compares it by meaning, so a file
// written by hand with the same settings in another order or spelling is left
// alone. Every candidate is decoded back with the same strict reading the
// module applies to the live file before it is proposed: a candidate that is
// not a hosts file is never written.
package containerdhosts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
)

func init() {
	module.Register(module.Registration{Name: "containerd_hosts", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// DefaultCertsDir is containerd's documented config_path.
const DefaultCertsDir = "/etc/containerd/certs.d"

// capabilities containerd knows for a host.
var knownCaps = []string{"pull", "resolve", "push"}

// Host is one `[host."<url>"]` table: a mirror or the registry itself, tried
// in the order given.
type Host struct {
	URL          string   `yaml:"url"`
	Capabilities []string `yaml:"capabilities"`
	SkipVerify   bool     `yaml:"skip_verify"`
	CA           []string `yaml:"ca"`
	OverridePath bool     `yaml:"override_path"`
}

// Args are the containerd_hosts module's arguments.
type Args struct {
	// Registry is the host namespace the file configures, as containerd
	// names the directory: `docker.io`, `harbor.lab:8080`, `_default`.
	Registry string `yaml:"registry"`
	// CertsDir is the directory config_path names; it must be a
	// `certs.d` directory, so a typo cannot write a hosts.toml where no
	// containerd looks.
	CertsDir string `yaml:"certs_dir"`
	// Server is the upstream used when no host answers (optional).
	Server string `yaml:"server"`
	Hosts  []Host `yaml:"hosts"`
	// State is present (the file holds exactly this) or absent (no file).
	State string `yaml:"state"`
	// MigrateMirrors moves every loaded containerd config file's
	// registry.mirrors (and, on containerd 1.x, registry.configs.<host>.tls)
	// into <certs_dir>/<namespace>/hosts.toml files with the same meaning
	// and makes config_path effective (migrate.go). It takes no registry,
	// server or hosts: the mirrors say them.
	MigrateMirrors bool `yaml:"migrate_mirrors"`
	// Config and Containerd are the node's main containerd config and
	// binary, for migrate_mirrors.
	Config     string `yaml:"config"`
	Containerd string `yaml:"containerd"`
}

// Module implements module.Module for containerd_hosts.
type Module struct{}

// NewArgs returns the defaults: containerd's certs.d, present.
func (Module) NewArgs() module.Args {
	return &Args{CertsDir: DefaultCertsDir, State: "present", Config: "/etc/containerd/config.toml", Containerd: ctrconf.DefaultBin}
}

// Validate checks what a type cannot: everything that would make a file
// containerd refuses, or one written where containerd never reads.
func (a *Args) Validate() error {
	if a.MigrateMirrors {
		switch {
		case a.Registry != "" || a.Server != "" || len(a.Hosts) > 0:
			return errors.New("migrate_mirrors takes no registry, server or hosts: the mirrors of the node's containerd config say them")
		case a.State != "present":
			return errors.New("migrate_mirrors works with state present only")
		case !path.IsAbs(a.Config) || path.Clean(a.Config) != a.Config:
			return fmt.Errorf("config %q must be a clean absolute path", a.Config)
		case !path.IsAbs(a.CertsDir) || path.Clean(a.CertsDir) != a.CertsDir || path.Base(a.CertsDir) != "certs.d":
			return fmt.Errorf("certs_dir %q must be a clean absolute path to a certs.d directory", a.CertsDir)
		}
		return nil
	}
	switch {
	case a.Registry == "":
		return errors.New("registry is required (the host namespace, e.g. docker.io or harbor.lab:8080)")
	case strings.ContainsAny(a.Registry, "/\\ \t\n") || a.Registry == "." || a.Registry == ".." || strings.HasPrefix(a.Registry, "."):
		return fmt.Errorf("registry %q is not a host namespace (a host name with an optional :port, or _default)", a.Registry)
	case !path.IsAbs(a.CertsDir) || path.Clean(a.CertsDir) != a.CertsDir:
		return fmt.Errorf("certs_dir %q must be a clean absolute path", a.CertsDir)
	case path.Base(a.CertsDir) != "certs.d":
		return fmt.Errorf("certs_dir %q is not a certs.d directory: containerd reads hosts.toml files from the directory config_path names, conventionally %s", a.CertsDir, DefaultCertsDir)
	case a.State != "present" && a.State != "absent":
		return fmt.Errorf("state %q must be present or absent", a.State)
	case a.State == "present" && a.Server == "" && len(a.Hosts) == 0:
		return errors.New("state present needs a server or at least one host")
	}
	if a.Server != "" {
		if err := checkURL(a.Server); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	seen := map[string]bool{}
	for i, h := range a.Hosts {
		if err := checkURL(h.URL); err != nil {
			return fmt.Errorf("hosts[%d].url: %w", i, err)
		}
		if seen[h.URL] {
			return fmt.Errorf("hosts[%d].url %q is listed twice", i, h.URL)
		}
		seen[h.URL] = true
		for _, c := range h.Capabilities {
			if !slices.Contains(knownCaps, c) {
				return fmt.Errorf("hosts[%d].capabilities: %q is not one of %s", i, c, strings.Join(knownCaps, ", "))
			}
		}
		for _, c := range h.CA {
			if !path.IsAbs(c) {
				return fmt.Errorf("hosts[%d].ca: %q must be an absolute path on the node", i, c)
			}
		}
	}
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q must start with http:// or https://", s)
	case u.Host == "":
		return fmt.Errorf("%q has no host", s)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q must not carry a query, a fragment or credentials", s)
	}
	return nil
}

// File is the hosts.toml the module writes.
func (a *Args) File() string { return path.Join(a.CertsDir, a.Registry, "hosts.toml") }

// hostsFile is a hosts.toml by meaning: what containerd's hosts loader
// (core/remotes/docker/config) reads. Host order is kept: containerd tries
// the hosts in file order.
type hostsFile struct {
	Server string
	// ServerSkipVerify, ServerCA and ServerOverridePath are the top
	// level's own host settings: the server is a host too. Only a
	// migration of legacy mirrors writes them (an endpoint tried last
	// whose TLS settings or path must stay as they were).
	ServerSkipVerify   bool
	ServerCA           []string
	ServerOverridePath bool
	Hosts              []hostEntry
}

type hostEntry struct {
	URL          string
	Capabilities []string
	SkipVerify   bool
	CA           []string
	OverridePath bool
}

// desired is the file's meaning from the arguments; an empty capability
// list means containerd's default for a host (pull and resolve).
func (a *Args) desired() hostsFile {
	f := hostsFile{Server: a.Server}
	for _, h := range a.Hosts {
		caps := h.Capabilities
		if len(caps) == 0 {
			caps = []string{"pull", "resolve"}
		}
		f.Hosts = append(f.Hosts, hostEntry{URL: h.URL, Capabilities: normCaps(caps), SkipVerify: h.SkipVerify, CA: slices.Clone(h.CA), OverridePath: h.OverridePath})
	}
	return f
}

func normCaps(c []string) []string {
	out := slices.Clone(c)
	sort.Strings(out)
	return slices.Compact(out)
}

// render writes f as TOML containerd reads; only what differs from
// containerd's defaults is spelled, capabilities always (they are the point).
func render(registry string, f hostsFile) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Managed by nodeconverge (module containerd_hosts): registry %s.\n", registry)
	if f.Server != "" {
		fmt.Fprintf(&b, "server = %s\n", strconv.Quote(f.Server))
	}
	if f.ServerSkipVerify {
		b.WriteString("skip_verify = true\n")
	}
	if len(f.ServerCA) > 0 {
		fmt.Fprintf(&b, "ca = %s\n", tomlStrings(f.ServerCA))
	}
	if f.ServerOverridePath {
		b.WriteString("override_path = true\n")
	}
	for _, h := range f.Hosts {
		fmt.Fprintf(&b, "\n[host.%s]\n", strconv.Quote(h.URL))
		fmt.Fprintf(&b, "  capabilities = %s\n", tomlStrings(h.Capabilities))
		if h.SkipVerify {
			b.WriteString("  skip_verify = true\n")
		}
		if len(h.CA) > 0 {
			fmt.Fprintf(&b, "  ca = %s\n", tomlStrings(h.CA))
		}
		if h.OverridePath {
			b.WriteString("  override_path = true\n")
		}
	}
	return b.Bytes()
}

// tomlStrings is an array of strings as TOML text. Quoting is Go's, which
// TOML reads the same for printable text; anything else fails the
// candidate's read-back in Check, so it is refused, never written.
func tomlStrings(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// parse reads a hosts.toml by meaning. It fails on what containerd's loader
// fails on (not TOML, a value of the wrong type, an unknown capability) and
// returns, separately, the keys it does not manage (client certificates,
// headers, dial timeouts): those are kept by no rewrite, so the plan names
// them.
func parse(content []byte) (hostsFile, []string, error) {
	var f hostsFile
	var doc map[string]any
	if err := toml.Unmarshal(content, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return f, nil, fmt.Errorf("line %d, column %d: %s", row, col, de.Error())
		}
		return f, nil, err
	}
	var unmanaged []string
	// The top level is itself a host (the server's own settings).
	for k, v := range doc {
		switch k {
		case "skip_verify", "override_path":
			b, ok := v.(bool)
			if !ok {
				return f, nil, fmt.Errorf("%s must be a boolean, got %T", k, v)
			}
			if k == "skip_verify" {
				f.ServerSkipVerify = b
			} else {
				f.ServerOverridePath = b
			}
		case "ca":
			ca, err := caList(v)
			if err != nil {
				return f, nil, err
			}
			f.ServerCA = ca
		case "server":
			s, ok := v.(string)
			if !ok {
				return f, nil, fmt.Errorf("server must be a string, got %T", v)
			}
			f.Server = s
		case "host":
			hosts, ok := v.(map[string]any)
			if !ok {
				return f, nil, fmt.Errorf("host must be a table, got %T", v)
			}
			for _, u := range orderedHosts(content, hosts) {
				h, un, err := parseHost(u, hosts[u])
				if err != nil {
					return f, nil, fmt.Errorf("host %q: %w", u, err)
				}
				f.Hosts = append(f.Hosts, h)
				unmanaged = append(unmanaged, un...)
			}
		default:
			unmanaged = append(unmanaged, k)
		}
	}
	sort.Strings(unmanaged)
	return f, unmanaged, nil
}

// orderedHosts lists the host tables in file order (containerd's loader
// keeps it: the order is the order of tries). A map loses it, so the order
// comes from where each table's header appears in the text.
func orderedHosts(content []byte, hosts map[string]any) []string {
	out := make([]string, 0, len(hosts))
	for u := range hosts {
		out = append(out, u)
	}
	pos := func(u string) int {
		for _, q := range []string{strconv.Quote(u), "'" + u + "'"} {
			if i := bytes.Index(content, []byte("host."+q)); i >= 0 {
				return i
			}
		}
		return len(content)
	}
	sort.SliceStable(out, func(i, j int) bool { return pos(out[i]) < pos(out[j]) })
	return out
}

func parseHost(u string, v any) (hostEntry, []string, error) {
	h := hostEntry{URL: u, Capabilities: []string{"pull", "resolve"}}
	t, ok := v.(map[string]any)
	if !ok {
		return h, nil, fmt.Errorf("must be a table, got %T", v)
	}
	var unmanaged []string
	for k, val := range t {
		switch k {
		case "capabilities":
			list, ok := val.([]any)
			if !ok {
				return h, nil, fmt.Errorf("capabilities must be an array, got %T", val)
			}
			h.Capabilities = nil
			for _, c := range list {
				s, ok := c.(string)
				if !ok || !slices.Contains(knownCaps, s) {
					return h, nil, fmt.Errorf("capabilities: %v is not one of %s", c, strings.Join(knownCaps, ", "))
				}
				h.Capabilities = append(h.Capabilities, s)
			}
			h.Capabilities = normCaps(h.Capabilities)
		case "skip_verify":
			b, ok := val.(bool)
			if !ok {
				return h, nil, fmt.Errorf("skip_verify must be a boolean, got %T", val)
			}
			h.SkipVerify = b
		case "override_path":
			b, ok := val.(bool)
			if !ok {
				return h, nil, fmt.Errorf("override_path must be a boolean, got %T", val)
			}
			h.OverridePath = b
		case "ca":
			ca, err := caList(val)
			if err != nil {
				return h, nil, err
			}
			h.CA = ca
		default:
			unmanaged = append(unmanaged, "host."+strconv.Quote(u)+"."+k)
		}
	}
	return h, unmanaged, nil
}

// caList reads `ca`: containerd takes one path or a list of paths.
func caList(val any) ([]string, error) {
	switch c := val.(type) {
	case string:
		return []string{c}, nil
	case []any:
		var out []string
		for _, e := range c {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("ca: %v is not a path", e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("ca must be a path or a list of paths, got %T", val)
}

func (f hostsFile) equal(g hostsFile) bool {
	return f.Server == g.Server && f.ServerSkipVerify == g.ServerSkipVerify && slices.Equal(f.ServerCA, g.ServerCA) &&
		f.ServerOverridePath == g.ServerOverridePath && slices.EqualFunc(f.Hosts, g.Hosts, func(a, b hostEntry) bool {
		return a.URL == b.URL && slices.Equal(a.Capabilities, b.Capabilities) && a.SkipVerify == b.SkipVerify &&
			slices.Equal(a.CA, b.CA) && a.OverridePath == b.OverridePath
	})
}

func (a *Args) query() transport.Query {
	q := transport.Query{Files: []string{a.File()}}
	for _, h := range a.Hosts {
		q.Files = append(q.Files, h.CA...)
	}
	return q
}

// Prefetch lets the runner read the file with the play's other reads.
func (Module) Prefetch(margs module.Args) transport.Query {
	a := margs.(*Args)
	if a.MigrateMirrors {
		return ctrconf.PrefetchQuery(a.Config, a.Containerd)
	}
	return a.query()
}

// Check compares the live file with the arguments by meaning and proposes
// the whole file when they differ. The candidate is decoded back before it
// is proposed, and every `ca` file must exist on the node: containerd fails
// the pull, not the load, on a missing one, which is too late.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	if a.MigrateMirrors {
		return a.checkMigrate(ctx, h)
	}
	snap, err := h.Query(ctx, a.query())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", a.File(), err)
	}
	live := snap.File(a.File())
	if live.IsDir {
		return nil, fmt.Errorf("%s is a directory", a.File())
	}
	plan := &module.Plan{}
	if a.State == "absent" {
		if live.Exists {
			plan.Files = append(plan.Files, module.FileChange{Action: module.Delete, Path: a.File(), Before: live.Content, BeforeHash: module.Hash(live.Content)})
		}
		return plan, nil
	}
	var missing []string
	for _, hst := range a.Hosts {
		for _, c := range hst.CA {
			if f := snap.File(c); !f.Exists || f.IsDir {
				missing = append(missing, c)
			}
		}
	}
	if len(missing) > 0 {
		return nil, &module.ValidationError{Msg: fmt.Sprintf("%s: ca file(s) not on the node: %s; containerd would fail every pull from %s", a.File(), strings.Join(missing, ", "), a.Registry)}
	}
	want := a.desired()
	cand := render(a.Registry, want)
	got, unmanaged, err := parse(cand)
	if err != nil || !got.equal(want) || len(unmanaged) > 0 {
		// A rendering bug, never the operator's: refuse rather than
		// write a file that does not say what was asked.
		return nil, fmt.Errorf("internal: the candidate %s does not read back as asked (%v)", a.File(), err)
	}
	plan.Evidence = append(plan.Evidence, module.Evidence{What: "candidate decodes as a containerd hosts file", Command: "decode " + a.File() + " (candidate)", OK: true, Required: true})
	if live.Exists {
		lf, lun, lerr := parse(live.Content)
		switch {
		case lerr != nil:
			plan.Notes = append(plan.Notes, fmt.Sprintf("the live %s is not a valid hosts file (%v): containerd fails pulls from %s until it is replaced", a.File(), lerr, a.Registry))
		case lf.equal(want) && len(lun) == 0:
			return plan, nil
		case len(lun) > 0:
			plan.Notes = append(plan.Notes, fmt.Sprintf("the live %s also sets %s, which this module does not manage; the rewrite drops them", a.File(), strings.Join(lun, ", ")))
		}
	}
	fc := module.FileChange{Action: module.Create, Path: a.File(), After: cand, AfterHash: module.Hash(cand), Mode: 0o644}
	if live.Exists {
		fc.Action, fc.Before, fc.BeforeHash, fc.Mode = module.Update, live.Content, module.Hash(live.Content), 0
	}
	plan.Files = append(plan.Files, fc)
	return plan, nil
}

// Apply writes (or removes) the file with a backup, so a failed run restores
// it. containerd reads hosts.toml at every pull: no restart is owed.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	return module.ApplyFiles(ctx, h, p)
}
