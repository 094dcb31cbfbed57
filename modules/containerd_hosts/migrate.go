package containerdhosts

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
	"nodeconverge/modules/containerd/nvidiatoml"
)

// migrate_mirrors (issue 28 #1): the CRI plugin refuses `registry.mirrors`
// (and, on containerd 1.x, `registry.configs.<host>.tls`) together with
// `config_path`, and every public config of kind, k3s, microk8s, GKE,
// kubespray and nvidia-ctk's tests writes mirrors, so a play that declares
// config_path could not touch those nodes. The migration writes each
// namespace's mirrors as `<certs_dir>/<namespace>/hosts.toml` with the same
// meaning (legacy.go), removes the mirrors and TLS tables from the files that
// wrote them with line-level edits (everything else byte for byte; `auth`
// stays where containerd reads it), and makes config_path effective where
// the daemon takes it from. The candidate tree is dumped with the node's own
// containerd before anything is written: it must load, have config_path and
// no mirrors, and change nothing else; every hosts.toml is decoded back and
// must list the endpoints the mirrors named, in their order.

// criPlugins are the plugin ids whose registry table holds mirrors, as a
// dump names them: 1.x's CRI plugin, 2.x's images plugin.
var criPlugins = []string{ctrconf.CRIPlugin, ctrconf.CRIImagesPlugin}

// isCRIName is a plugin id under which a file can write the registry table
// (the version 1 short name included).
func isCRIName(id string) bool {
	return id == "cri" || id == ctrconf.CRIPlugin || id == ctrconf.CRIImagesPlugin
}

// legacyMatch accepts the paths of a file's text the migration removes:
// every table and key at or below registry.mirrors, and (tls true, on 1.x)
// at or below registry.configs.<host>.tls.
func legacyMatch(tls bool) func(p []string) bool {
	return func(p []string) bool {
		if len(p) < 4 || p[0] != "plugins" || !isCRIName(p[1]) || p[2] != "registry" {
			return false
		}
		return p[3] == "mirrors" || tls && p[3] == "configs" && len(p) >= 6 && p[5] == "tls"
	}
}

// legacyKey reports whether a dump key is one the migration changes.
func legacyKey(key string) bool {
	s := ctrconf.SplitKey(key)
	if len(s) < 4 || s[0] != "plugins" || !slices.Contains(criPlugins, s[1]) || s[2] != "registry" {
		return false
	}
	return s[3] == "mirrors" || s[3] == "config_path" && len(s) == 4 || s[3] == "configs" && len(s) >= 6 && s[5] == "tls"
}

// MigratesMirrors implements ctrconf.MirrorsOwner.
func (a *Args) MigratesMirrors() bool { return a.MigrateMirrors }

// Declares implements ctrconf.Owner: a migration owns the registry's
// mirrors and TLS tables (they go) and config_path (it becomes certs_dir).
func (a *Args) Declares(key string, _ int) (string, bool) {
	if !a.MigrateMirrors || !legacyKey(key) {
		return "", false
	}
	if s := ctrconf.SplitKey(key); s[3] == "config_path" {
		return strconv.Quote(a.CertsDir), true
	}
	return "", true
}

// sub follows keys through nested tables.
func sub(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

// mirrorsOf reads a registry table's mirrors: namespace -> endpoints.
func mirrorsOf(reg map[string]any, where string) (map[string][]string, error) {
	out := map[string][]string{}
	for ns, v := range sub(reg, "mirrors") {
		t, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: registry.mirrors.%q is not a table", where, ns)
		}
		var eps []string
		switch l := t["endpoint"].(type) {
		case nil:
		case []any:
			for _, e := range l {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("%s: registry.mirrors.%q.endpoint holds %v, not a URL", where, ns, e)
				}
				eps = append(eps, s)
			}
		default:
			return nil, fmt.Errorf("%s: registry.mirrors.%q.endpoint is not a list", where, ns)
		}
		for k := range t {
			if k != "endpoint" {
				return nil, fmt.Errorf("%s: registry.mirrors.%q.%s is not a mirror setting containerd knows", where, ns, k)
			}
		}
		out[ns] = eps
	}
	return out, nil
}

// tlsOf reads a registry table's configs.<host>.tls tables.
func tlsOf(reg map[string]any, where string) (map[string]legacyTLS, error) {
	out := map[string]legacyTLS{}
	for h, v := range sub(reg, "configs") {
		c, _ := v.(map[string]any)
		t, ok := c["tls"].(map[string]any)
		if !ok {
			continue
		}
		var l legacyTLS
		l.Source = where
		for k, val := range t {
			switch k {
			case "insecure_skip_verify":
				b, ok := val.(bool)
				if !ok {
					return nil, fmt.Errorf("%s: configs.%q.tls.insecure_skip_verify is not a boolean", where, h)
				}
				l.SkipVerify = b
			case "ca_file", "cert_file", "key_file":
				s, ok := val.(string)
				if !ok {
					return nil, fmt.Errorf("%s: configs.%q.tls.%s is not a path", where, h, k)
				}
				switch k {
				case "ca_file":
					l.CAFile = s
				case "cert_file":
					l.CertFile = s
				default:
					l.KeyFile = s
				}
			default:
				return nil, fmt.Errorf("%s: configs.%q.tls.%s is not a TLS setting the migration knows", where, h, k)
			}
		}
		out[h] = l
	}
	return out, nil
}

// fileRegistry is the registry table a file writes, plugin names migrated.
func fileRegistry(f *ctrconf.File) []map[string]any {
	var out []map[string]any
	for _, p := range criPlugins {
		if v, ok := f.Value(ctrconf.JoinKey("plugins", p, "registry")); ok {
			if m, ok := v.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// effectiveRegistry is the dump's registry tables (1.x: the CRI plugin's;
// 2.x: the images plugin's).
func effectiveRegistry(e *ctrconf.Effective) []map[string]any {
	var out []map[string]any
	for _, p := range criPlugins {
		if m := sub(e.Values, "plugins", p, "registry"); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// effectiveConfigPath is the dump's config_path ("" when unset).
func effectiveConfigPath(e *ctrconf.Effective) string {
	for _, reg := range effectiveRegistry(e) {
		if s, _ := reg["config_path"].(string); s != "" {
			return s
		}
	}
	return ""
}

// migration is what checkMigrate gathered.
type migration struct {
	mirrors map[string][]string // namespace -> endpoints as written
	from    map[string]string   // namespace -> where its endpoints come from
	tls     map[string]legacyTLS
	edit    []string // files whose text holds what goes, load order
}

// gatherLegacy reads the mirrors and TLS settings to migrate: the dump's
// where they are in effect (the daemon's word), else the last loaded file
// that writes them (the value 2.x's per-key merge keeps, and the one 1.x
// brings back once a shadowing drop-in is moved away).
func gatherLegacy(tree *ctrconf.Tree, base *ctrconf.Effective, major int) (*migration, error) {
	m := &migration{mirrors: map[string][]string{}, from: map[string]string{}, tls: map[string]legacyTLS{}}
	withTLS := major < 2
	for i := range tree.Files {
		f := &tree.Files[i]
		if f.Missing {
			continue
		}
		if !f.Parses {
			if strings.Contains(string(f.Content), "mirrors") {
				return nil, fmt.Errorf("%s does not parse (%s), so its registry mirrors cannot be read: repair it first (containerd_nvidia state: repair repairs nvidia tables pasted twice)", f.Path, f.ParseErr)
			}
			continue
		}
		touched := false
		for _, reg := range fileRegistry(f) {
			ms, err := mirrorsOf(reg, f.Path)
			if err != nil {
				return nil, err
			}
			for ns, eps := range ms {
				m.mirrors[ns], m.from[ns] = eps, f.Path
			}
			// An empty mirrors table (containerd's own `config default`
			// prints one) conflicts with nothing and stays.
			touched = touched || len(ms) > 0
			if withTLS {
				ts, err := tlsOf(reg, f.Path)
				if err != nil {
					return nil, err
				}
				for h, t := range ts {
					m.tls[h] = t
				}
				touched = touched || len(ts) > 0
			}
		}
		if touched {
			m.edit = append(m.edit, f.Path)
		}
	}
	for _, reg := range effectiveRegistry(base) {
		ms, err := mirrorsOf(reg, "the live dump")
		if err != nil {
			return nil, err
		}
		for ns, eps := range ms {
			m.mirrors[ns], m.from[ns] = eps, "the live dump (in effect)"
		}
		if withTLS {
			ts, err := tlsOf(reg, "the live dump")
			if err != nil {
				return nil, err
			}
			for h, t := range ts {
				m.tls[h] = t
			}
		}
	}
	return m, nil
}

// plannedHosts is one hosts.toml the migration writes (or finds written).
type plannedHosts struct {
	ns    string
	file  string
	want  hostsFile
	tries []string
}

// hostsPlan turns the gathered settings into hosts files.
func (m *migration) hostsPlan(certsDir string) ([]plannedHosts, error) {
	var out []plannedHosts
	covered := map[string]bool{}
	nss := make([]string, 0, len(m.mirrors))
	for ns := range m.mirrors {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		if ns != "*" && (strings.ContainsAny(ns, "/\\ \t") || ns == "." || ns == ".." || strings.HasPrefix(ns, ".")) {
			return nil, fmt.Errorf("registry.mirrors.%q (%s) is not a host namespace a certs.d directory can name", ns, m.from[ns])
		}
		list, err := legacyEndpoints(ns, m.mirrors[ns])
		if err != nil {
			return nil, fmt.Errorf("registry.mirrors.%q (%s): %w", ns, m.from[ns], err)
		}
		if len(list) == 0 {
			// A wildcard without endpoints changes nothing a pull does.
			continue
		}
		f, err := hostsFor(ns, list, m.tls)
		if err != nil {
			return nil, fmt.Errorf("registry.mirrors.%q (%s): %w", ns, m.from[ns], err)
		}
		out = append(out, plannedHosts{ns: ns, file: path.Join(certsDir, dirOf(ns), "hosts.toml"), want: f, tries: list})
		for _, s := range list {
			covered[hostOf(s)] = true
		}
	}
	// TLS settings for a host no mirror names apply, in legacy mode, to
	// the namespace whose default host it is.
	hs := make([]string, 0, len(m.tls))
	for h := range m.tls {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	for _, h := range hs {
		t := m.tls[h]
		if covered[h] || !t.SkipVerify && t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" {
			continue
		}
		if _, ok := m.mirrors["*"]; ok {
			return nil, fmt.Errorf("configs.%q.tls (%s) applies to a host no mirror names while registry.mirrors.\"*\" is set: which namespaces reach %s depends on the pull; move it by hand", h, t.Source, h)
		}
		ns := h
		if h == "registry-1.docker.io" {
			ns = "docker.io"
		}
		list, err := legacyEndpoints(ns, nil)
		if err != nil {
			return nil, err
		}
		f, err := hostsFor(ns, list, m.tls)
		if err != nil {
			return nil, err
		}
		out = append(out, plannedHosts{ns: ns, file: path.Join(certsDir, dirOf(ns), "hosts.toml"), want: f, tries: list})
	}
	return out, nil
}

func hostOf(s string) string {
	i := strings.Index(s, "://")
	rest := s[i+3:]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// configPathKey is where a file spells config_path: its own layout.
func configPathKey(f *ctrconf.File, content []byte, major int) []string {
	switch {
	case f.Version <= 1 && nvidiatoml.UsesV1CRIName(content):
		return []string{"plugins", "cri", "registry", "config_path"}
	case major >= 2 && f.Version >= 3:
		return []string{"plugins", ctrconf.CRIImagesPlugin, "registry", "config_path"}
	}
	return []string{"plugins", ctrconf.CRIPlugin, "registry", "config_path"}
}

// configPathTarget is the file a config_path goes into to take effect: on
// 1.x the last loaded file that mentions the CRI plugin (it supplies the
// plugin's whole table); on 2.x the last edited file (it wrote the mirrors
// in effect), else the main config.
func configPathTarget(tree *ctrconf.Tree, m *migration) *ctrconf.File {
	if tree.Major() < 2 {
		var owner *ctrconf.File
		for i := range tree.Files {
			if f := &tree.Files[i]; !f.Missing && f.Parses && slices.Contains(f.Plugins, ctrconf.CRIPlugin) {
				owner = f
			}
		}
		if owner != nil {
			return owner
		}
	} else if len(m.edit) > 0 {
		return tree.File(m.edit[len(m.edit)-1])
	}
	return tree.File(tree.Main)
}

// checkMigrate plans the migration.
func (a *Args) checkMigrate(ctx context.Context, h transport.Reader) (*module.Plan, error) {
	tree, err := ctrconf.Gather(ctx, h, a.Config, a.Containerd)
	if err != nil {
		return nil, fmt.Errorf("read containerd config: %w", err)
	}
	base, err := ctrconf.Dump(ctx, h, tree, nil)
	if err != nil {
		return nil, fmt.Errorf("dump live config: %w", err)
	}
	plan := &module.Plan{}
	plan.Evidence = append(plan.Evidence, ctrconf.DumpEvidence("live tree", tree, base))
	if !base.OK {
		return nil, &module.ValidationError{Msg: fmt.Sprintf("the node's containerd config does not load, so its registry mirrors cannot be measured: %s", base.ErrLine()), Evidence: plan.Evidence}
	}
	major := tree.Major()
	refuse := func(format string, args ...any) error {
		return &module.ValidationError{Msg: "refusing to migrate registry mirrors; nothing was changed: " + fmt.Sprintf(format, args...), Evidence: plan.Evidence}
	}
	m, err := gatherLegacy(tree, base, major)
	if err != nil {
		return nil, refuse("%v", err)
	}
	if len(m.edit) == 0 {
		plan.Notes = append(plan.Notes, "no loaded file writes registry mirrors"+map[bool]string{true: " or TLS tables", false: ""}[major < 2]+": nothing to migrate")
		return plan, nil
	}
	if cp := effectiveConfigPath(base); cp != "" && cp != a.CertsDir {
		return nil, refuse("containerd loads config_path = %q, not certs_dir %s: the hosts.toml files would not be read; set certs_dir to it", cp, a.CertsDir)
	}
	hosts, err := m.hostsPlan(a.CertsDir)
	if err != nil {
		return nil, refuse("%v", err)
	}

	// The operator's own hosts.toml files and the CA files the TLS
	// settings name, in one read.
	q := transport.Query{}
	for _, ph := range hosts {
		q.Files = append(q.Files, ph.file)
		q.Files = append(q.Files, ph.want.ServerCA...)
		for _, he := range ph.want.Hosts {
			q.Files = append(q.Files, he.CA...)
		}
	}
	snap, err := h.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read hosts files: %w", err)
	}
	var writes []module.FileChange
	for _, ph := range hosts {
		cand := render(dirOf(ph.ns), ph.want)
		got, unmanaged, err := parse(cand)
		if err != nil || !got.equal(ph.want) || len(unmanaged) > 0 || !slices.Equal(got.tries(), ph.tries) {
			return nil, fmt.Errorf("internal: the candidate %s does not read back as the mirrors say (%v)", ph.file, err)
		}
		plan.Evidence = append(plan.Evidence, module.Evidence{What: fmt.Sprintf("candidate %s decodes to the endpoints the mirrors of %s name, in order: %s", ph.file, ph.ns, strings.Join(ph.tries, ", ")), Command: "decode " + ph.file + " (candidate)", OK: true, Required: true})
		live := snap.File(ph.file)
		switch {
		case live.IsDir:
			return nil, refuse("%s is a directory", ph.file)
		case live.Exists:
			lf, lun, lerr := parse(live.Content)
			if lerr != nil {
				return nil, refuse("%s already exists and is not a valid hosts file (%v); the mirrors of %s (%s) would go there: fix or remove it", ph.file, lerr, ph.ns, m.from[ph.ns])
			}
			if !lf.equal(ph.want) {
				return nil, refuse("%s already exists and says %s; the mirrors of %s in %s say %s: a hosts.toml is never overwritten, merge them by hand", ph.file, describe(lf), ph.ns, m.from[ph.ns], describe(ph.want))
			}
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s already says what the mirrors of %s say; kept as it is", ph.file, ph.ns))
			if len(lun) > 0 {
				plan.Notes = append(plan.Notes, fmt.Sprintf("%s also sets %s, kept", ph.file, strings.Join(lun, ", ")))
			}
		default:
			writes = append(writes, module.FileChange{Action: module.Create, Path: ph.file, After: cand, AfterHash: module.Hash(cand), Mode: 0o644})
			plan.Notes = append(plan.Notes, fmt.Sprintf("registry %s: mirrors from %s become %s (tries %s)", ph.ns, m.from[ph.ns], ph.file, strings.Join(ph.tries, ", ")))
		}
		for _, c := range append(slices.Clone(ph.want.ServerCA), caOf(ph.want)...) {
			if f := snap.File(c); !f.Exists || f.IsDir {
				plan.Notes = append(plan.Notes, fmt.Sprintf("ca file %s is not on the node: pulls through it fail after the migration as they do now", c))
			}
		}
	}

	// The files' own text, mirrors (and TLS tables on 1.x) removed.
	stripped := ctrconf.Overrides{}
	for _, p := range m.edit {
		f := tree.File(p)
		out, _ := nvidiatoml.StripTables(f.Content, legacyMatch(major < 2))
		var doc map[string]any
		if err := toml.Unmarshal(out, &doc); err != nil {
			return nil, refuse("%s without its mirrors is not valid TOML (%v): the registry table is probably written inline", p, err)
		}
		stripped[p] = out
	}
	withCP := ctrconf.Overrides{}
	target := configPathTarget(tree, m)
	for p, c := range stripped {
		withCP[p] = c
	}
	tc := withCP[target.Path]
	if tc == nil {
		tc = target.Content
	}
	key := configPathKey(target, tc, major)
	if tc, err = nvidiatoml.SetKey(tc, key, a.CertsDir, false); err != nil {
		return nil, refuse("set %s in %s: %v", ctrconf.JoinKey(key...), target.Path, err)
	}
	withCP[target.Path] = tc
	effs, err := ctrconf.DumpMany(ctx, h, tree, []ctrconf.Overrides{stripped, withCP})
	if err != nil {
		return nil, fmt.Errorf("dump candidate: %w", err)
	}
	var chosen ctrconf.Overrides
	var eff *ctrconf.Effective
	var why []string
	for i, e := range effs {
		plan.Evidence = append(plan.Evidence, ctrconf.DumpEvidence(fmt.Sprintf("candidate tree %d (mirrors removed%s)", i+1, map[bool]string{true: ", config_path in " + target.Path, false: ""}[i == 1]), tree, e))
		if err := a.verifyMigrated(ctx, base, e, major); err != nil {
			why = append(why, err.Error())
			continue
		}
		chosen, eff = []ctrconf.Overrides{stripped, withCP}[i], e
		break
	}
	if chosen == nil {
		return nil, refuse("%s", strings.Join(why, "; "))
	}
	paths := make([]string, 0, len(chosen))
	for p := range chosen {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := tree.File(p)
		plan.Files = append(plan.Files, module.FileChange{Action: module.Update, Path: p, Before: f.Content, After: chosen[p], BeforeHash: module.Hash(f.Content), AfterHash: module.Hash(chosen[p])})
	}
	plan.Files = append(plan.Files, writes...)
	if r := ctrconf.PlatformRefusal(tree, plan.Files); r != "" {
		return nil, &module.ValidationError{Msg: r, Evidence: plan.Evidence}
	}
	plan.Effective = ctrconf.Attribute(tree, ctrconf.Diff(base, eff))
	return plan, nil
}

func caOf(f hostsFile) []string {
	var out []string
	for _, h := range f.Hosts {
		out = append(out, h.CA...)
	}
	return out
}

// describe is a hosts file's meaning in one line.
func describe(f hostsFile) string {
	parts := make([]string, 0, len(f.Hosts)+1)
	for _, h := range f.Hosts {
		parts = append(parts, h.URL+" ["+strings.Join(h.Capabilities, ",")+"]")
	}
	if f.Server != "" {
		parts = append(parts, "server "+f.Server)
	}
	if len(parts) == 0 {
		return "no hosts"
	}
	return strings.Join(parts, ", ")
}

// verifyMigrated proves a candidate dump: it loads, config_path is
// certs_dir, no mirrors are left, the CRI plugin would load, and nothing
// else changed but what the migration or another task of the play owns.
func (a *Args) verifyMigrated(ctx context.Context, base, eff *ctrconf.Effective, major int) error {
	if !eff.OK {
		return fmt.Errorf("the candidate tree does not load: %s", eff.ErrLine())
	}
	if cp := effectiveConfigPath(eff); cp != a.CertsDir {
		return fmt.Errorf("the candidate loads config_path = %q, not %s", cp, a.CertsDir)
	}
	for _, reg := range effectiveRegistry(eff) {
		if len(sub(reg, "mirrors")) > 0 {
			return fmt.Errorf("the candidate still loads registry mirrors")
		}
	}
	if c := ctrconf.RegistryConflict(eff); c != "" {
		return fmt.Errorf("%s", c)
	}
	var other []string
	for _, c := range ctrconf.Diff(base, eff) {
		if legacyKey(c.Key) || ctrconf.NotASetting(c.Key) || ctrconf.PlayDeclares(ctx, c.Key, c.After, major) != "" {
			continue
		}
		other = append(other, fmt.Sprintf("%s: %s -> %s", c.Key, orNone(c.Before), orNone(c.After)))
	}
	if len(other) > 0 {
		return fmt.Errorf("the change would also alter effective settings it does not own:\n  %s", strings.Join(other, "\n  "))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(not set)"
	}
	return s
}
