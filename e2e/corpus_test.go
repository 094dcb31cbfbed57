package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"gopkg.in/yaml.v3"

	"nodeconverge/lab/labtest"
	"nodeconverge/modules/containerd/ctrconf"
	containerdsettings "nodeconverge/modules/containerd_settings"
)

// The corpus matrix runs the shipped playbook on every public containerd
// config in testdata/corpus, alone and under two drop-in sets, on each
// containerd generation the lab has, and records per cell what happened,
// measured with the node's own dumps. A cell either converges (every
// assertion below holds) or is refused before anything on its host is
// written; anything else is a defect the table names.
//
// Many cells fail until issue 10's defects are fixed, so the test records
// every outcome and fails only where testdata/corpus/EXPECTED says what a
// cell must do. NODECONVERGE_CORPUS_TABLE names a file to write the table
// to (`make corpus` writes testdata/corpus/MATRIX.md).

// corpusDir is the corpus below the e2e package.
const corpusDir = "testdata/corpus"

// namedRuntimes are the runtimes the shipped playbook manages (the GPU
// Operator's three); every other runtime is somebody else's.
var namedRuntimes = map[string]string{
	"nvidia":        "/usr/local/nvidia/toolkit/nvidia-container-runtime",
	"nvidia-cdi":    "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi",
	"nvidia-legacy": "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy",
}

// confDGlob is where the GPU Operator and the incident put their drop-ins;
// the toolkit adds it to the main config's imports when it writes one.
const confDGlob = "/etc/containerd/conf.d/*.toml"

// corpusConfig is one directory of the corpus.
type corpusConfig struct {
	name string
	dir  string
	// only2x: the config is written for containerd 2.x (SOURCE says
	// "for: 2.x"); containerd 1.x ignores its CRI settings silently.
	only2x bool
}

// dropinSet is what sits in /etc/containerd/conf.d next to the main config.
type dropinSet struct {
	name  string
	files [][2]string // node path, source path
}

func loadCorpus(t *testing.T) []corpusConfig {
	t.Helper()
	ents, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatalf("read corpus: %v", err)
	}
	var out []corpusConfig
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		dir := filepath.Join(corpusDir, e.Name())
		src, err := os.ReadFile(filepath.Join(dir, "SOURCE"))
		if err != nil {
			t.Fatalf("corpus %s: every config names its source: %v", e.Name(), err)
		}
		for _, field := range []string{"repository:", "path:", "commit:"} {
			if !regexp.MustCompile(`(?m)^` + field).Match(src) {
				t.Fatalf("corpus %s: SOURCE lacks %q", e.Name(), field)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "config.toml")); err != nil {
			t.Fatalf("corpus %s: %v", e.Name(), err)
		}
		out = append(out, corpusConfig{name: e.Name(), dir: dir, only2x: regexp.MustCompile(`(?m)^for: 2\.x$`).Match(src)})
	}
	return out
}

func dropinSets() []dropinSet {
	incident := filepath.Join(labtest.RepoRoot(), "lab", "scenarios", "incident")
	return []dropinSet{
		{name: "alone"},
		{name: "incident", files: [][2]string{
			{"/etc/containerd/conf.d/99-nvidia.toml", filepath.Join(incident, "99-nvidia.toml")},
			{"/etc/containerd/conf.d/zz-labhub-registry.toml", filepath.Join(incident, "zz-labhub-registry.toml")},
		}},
		{name: "gpu-operator", files: [][2]string{
			{"/etc/containerd/conf.d/99-nvidia.toml", filepath.Join(corpusDir, "_dropins", "gpu-operator-99-nvidia.toml")},
		}},
	}
}

// TestCorpusHasSources keeps the corpus honest without a lab: at least 15
// configs, each with its source, 1.x and 2.x, GPU and non-GPU, and every
// config parses as TOML.
func TestCorpusHasSources(t *testing.T) {
	cs := loadCorpus(t)
	if len(cs) < 15 {
		t.Fatalf("corpus has %d configs, want at least 15", len(cs))
	}
	var v2, v3, gpu, plain int
	for _, c := range cs {
		b, err := os.ReadFile(filepath.Join(c.dir, "config.toml"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := toml.Unmarshal(b, &m); err != nil {
			t.Errorf("%s: config.toml does not parse: %v", c.name, err)
			continue
		}
		if c.only2x {
			v3++
		} else {
			v2++
		}
		if strings.Contains(string(b), "nvidia") {
			gpu++
		} else {
			plain++
		}
	}
	if v2 == 0 || v3 == 0 || gpu == 0 || plain == 0 {
		t.Fatalf("corpus lacks a kind: 1.x %d, 2.x %d, GPU %d, non-GPU %d", v2, v3, gpu, plain)
	}
	if _, err := os.Stat(filepath.Join(corpusDir, "_dropins", "SOURCE")); err != nil {
		t.Fatalf("the GPU Operator's drop-in names its source: %v", err)
	}
}

// cell is one (config, drop-in set, generation) of the matrix.
type cell struct {
	cfg  corpusConfig
	set  dropinSet
	gen  string
	node string
	// importsAdded: the main config did not import conf.d and the drop-ins
	// were there, so the import was added as the GPU Operator does.
	importsAdded bool

	baseline nodeState
	after    nodeState
	// endpoints, for a config with registry mirrors that the run
	// converged, is per registry asked how containerd's own resolver says
	// its pull endpoints changed ("" for not at all; corpus_resolve_test.go).
	endpoints map[string]string

	outcome string
	detail  string
}

func (c *cell) id() string { return c.cfg.name + "/" + c.set.name + "/" + c.gen }

// meaningful is false for a 2.x-only config on 1.x: the daemon ignores its
// settings silently, so there is nothing of the operator's to keep.
func (c *cell) meaningful() bool { return !(c.cfg.only2x && c.gen != "2.x") }

// nodeState is what the node's own daemon and binary say.
type nodeState struct {
	active  bool
	criOK   bool
	status  string // is-active and the CRI plugins' status, for the table
	dump    map[string]string
	raw     string // the dump as containerd printed it
	dumpErr string
}

// withImport returns cfg importing confDGlob, the way the GPU Operator's
// toolkit adds its drop-in directory: appended to an existing top-level
// imports array, or a new imports line at the top.
func withImport(cfg []byte) ([]byte, bool, error) {
	var m map[string]any
	if err := toml.Unmarshal(cfg, &m); err != nil {
		return nil, false, fmt.Errorf("parse: %w", err)
	}
	if v, _ := m["version"].(int64); v < 2 {
		// Config version 1 has no drop-in directory: the toolkit edits such
		// a file in place, and containerd 1.x refuses a version 2 drop-in
		// under it (short plugin names are not valid in the merged tree).
		return cfg, false, nil
	}
	imp, _ := m["imports"].([]any)
	for _, v := range imp {
		if v == confDGlob {
			return cfg, false, nil
		}
	}
	re := regexp.MustCompile(`(?m)^imports[ \t]*=[ \t]*\[(.*)\][ \t]*$`)
	if loc := re.FindSubmatchIndex(cfg); loc != nil {
		inner := strings.TrimSpace(string(cfg[loc[2]:loc[3]]))
		inner = strings.TrimSuffix(inner, ",")
		if inner != "" {
			inner += ", "
		}
		line := fmt.Sprintf("imports = [%s%q]", inner, confDGlob)
		out := append(append(append([]byte{}, cfg[:loc[0]]...), line...), cfg[loc[1]:]...)
		return out, true, nil
	}
	if _, ok := m["imports"]; ok {
		return nil, false, fmt.Errorf("imports is not a one-line array; cannot add %s", confDGlob)
	}
	return append([]byte(fmt.Sprintf("imports = [%q]\n", confDGlob)), cfg...), true, nil
}

func TestWithImport(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"oom_score = 0\n", "oom_score = 0\n"},
		{"version = 2\n", "imports = [\"/etc/containerd/conf.d/*.toml\"]\nversion = 2\n"},
		{"version = 3\nimports = []\n[grpc]\n", "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n[grpc]\n"},
		{"version = 2\nimports = [\"/etc/containerd/config.d/*.toml\"]\n", "version = 2\nimports = [\"/etc/containerd/config.d/*.toml\", \"/etc/containerd/conf.d/*.toml\"]\n"},
		{"version = 2\nimports = ['/etc/containerd/conf.d/*.toml']\n", "version = 2\nimports = ['/etc/containerd/conf.d/*.toml']\n"},
	} {
		got, _, err := withImport([]byte(tc.in))
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("withImport(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// setUpNode writes the cell's files where the node sees them.
func setUpNode(t *testing.T, l *labtest.Lab, c *cell) {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join(c.cfg.dir, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.set.files) > 0 {
		if cfg, c.importsAdded, err = withImport(cfg); err != nil {
			t.Fatalf("%s: %v", c.id(), err)
		}
	}
	write := func(nodePath string, b []byte) {
		p := l.NodePath(c.node, nodePath)
		if p == nodePath {
			t.Fatalf("%s: %s is not a per-node path of the lab", c.id(), nodePath)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("/etc/containerd/config.toml", cfg)
	extra := filepath.Join(c.cfg.dir, "files")
	if _, err := os.Stat(extra); err == nil {
		err := filepath.WalkDir(extra, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(extra, p)
			if err != nil {
				return fmt.Errorf("relative path of %s: %w", p, err)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			write("/"+filepath.ToSlash(rel), b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range c.set.files {
		b, err := os.ReadFile(f[1])
		if err != nil {
			t.Fatal(err)
		}
		write(f[0], b)
	}
	provideLinks(t, l, c)
}

// overlayOwn mounts, in the node's mount namespace, an overlay over dir:
// the machine's dir below, the node's own directory above. The files the
// lab bind-mounts below dir (its systemctl, modprobe and lsmod stand-ins
// over /usr/bin's) would be hidden by the overlay, so each is first bound
// to a holding file of the node's and bound back over the overlay after.
func overlayOwn(t *testing.T, l *labtest.Lab, c *cell, dir string) {
	t.Helper()
	own := filepath.Join(l.Dir, "nodes", c.node, "overlay", strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_"))
	upper, work, hold := filepath.Join(own, "upper"), filepath.Join(own, "work"), filepath.Join(own, "hold")
	for _, d := range []string{upper, work, hold} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if strings.ContainsAny(own, ",:") {
		t.Fatalf("%s: the overlay's directory %s holds a character mount options cannot carry", c.id(), own)
	}
	run := func(args ...string) string {
		out, err := l.TryExec(c.node, args...)
		if err != nil {
			t.Fatalf("%s: an overlay of its own over %s: %v\n%s", c.id(), dir, err, out)
		}
		return out
	}
	// /proc/self/mountinfo's fifth field is the mount point (octal
	// escapes for blanks, which the lab's paths do not have).
	var subs []string
	for _, ln := range strings.Split(run("cat", "/proc/self/mountinfo"), "\n") {
		if f := strings.Fields(ln); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") && !slices.Contains(subs, f[4]) {
			subs = append(subs, f[4])
		}
	}
	held := map[string]string{}
	for i, p := range subs {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			t.Fatalf("%s: %s is mounted below %s and is not a file the lab binds: %v", c.id(), p, dir, err)
		}
		h := filepath.Join(hold, fmt.Sprint(i))
		if err := os.WriteFile(h, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		run("mount", "--bind", p, h)
		held[p] = h
	}
	run("mount", "-t", "overlay", "overlay", "-o", "lowerdir="+dir+",upperdir="+upper+",workdir="+work, dir)
	for _, p := range subs {
		run("mount", "--bind", held[p], p)
	}
}

// provideLinks gives the cell's node the files its config names that the
// platform installs and a lab node lacks (the config's lab-links file,
// "<node path> -> <target>" a line, each with its source in the comments):
// a symbolic link at the node path, in place of the machine's file where
// the machine has one (EKS's /usr/sbin/runc). Below a directory that the
// lab does not give each node of its own, the node's directory becomes an
// overlay of the machine's (lower) and the node's own (upper), mounted in
// the node's private mount namespace, so nothing changes on the machine
// and no other node sees it.
func provideLinks(t *testing.T, l *labtest.Lab, c *cell) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.cfg.dir, "lab-links"))
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	mounted := map[string]bool{}
	for n, ln := range strings.Split(string(b), "\n") {
		if ln = strings.TrimSpace(ln); ln == "" || strings.HasPrefix(ln, "#") {
			continue
		}
		f := strings.Fields(ln)
		if len(f) != 3 || f[1] != "->" || !filepath.IsAbs(f[0]) || !filepath.IsAbs(f[2]) {
			t.Fatalf("%s/lab-links:%d: want \"<absolute node path> -> <absolute target>\", got %q", c.cfg.name, n+1, ln)
		}
		dir := filepath.Dir(f[0])
		if l.NodePath(c.node, dir) == dir && !mounted[dir] {
			overlayOwn(t, l, c, dir)
			mounted[dir] = true
		}
		if out, err := l.TryExec(c.node, "ln", "-sf", f[2], f[0]); err != nil {
			t.Fatalf("%s: link %s -> %s: %v\n%s", c.id(), f[0], f[2], err, out)
		}
	}
}

// probe reads a node's state: unit, CRI plugins and the effective config.
func probe(l *labtest.Lab, node string) nodeState {
	var s nodeState
	out, _ := l.TryExec(node, "sh", "-c",
		"systemctl is-active containerd; timeout 10 ctr --address /run/containerd/containerd.sock --connect-timeout 2s plugins ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.active = len(lines) > 0 && strings.TrimSpace(lines[0]) == "active"
	var cri []string
	criOK := true
	for _, ln := range lines[1:] {
		f := strings.Fields(ln)
		if len(f) < 3 || !strings.Contains(f[1], "cri") {
			continue
		}
		st := f[len(f)-1]
		cri = append(cri, st)
		if st != "ok" {
			criOK = false
		}
	}
	s.criOK = s.active && criOK && len(cri) > 0
	switch {
	case !s.active:
		s.status = "containerd " + strings.TrimSpace(lines[0])
	case !s.criOK:
		s.status = "CRI " + strings.Join(cri, ",")
	default:
		s.status = "up, CRI ok"
	}
	dump, err := l.TryExec(node, "containerd", "config", "dump")
	if err != nil {
		s.dumpErr = firstLine(err.Error())
		return s
	}
	var m map[string]any
	if err := toml.Unmarshal([]byte(dump), &m); err != nil {
		s.dumpErr = "dump does not parse: " + err.Error()
		return s
	}
	s.dump, s.raw = ctrconf.Flatten(m), dump
	return s
}

// reportJSON is the part of a --report json file the matrix reads.
type reportJSON struct {
	Results []struct {
		Task    string `json:"task"`
		Host    string `json:"host"`
		Handler bool   `json:"handler"`
		Status  string `json:"status"`
		Msg     string `json:"msg"`
	} `json:"results"`
	Recap map[string]struct {
		Changed     int `json:"changed"`
		Failed      int `json:"failed"`
		Unreachable int `json:"unreachable"`
	} `json:"recap"`
}

func readReport(t *testing.T, p string) reportJSON {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var r reportJSON
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report %s: %v", p, err)
	}
	return r
}

// failure is the first failed task of host in r ("" if none), and whether
// it was a handler (a restart that failed its gates after files changed).
func (r reportJSON) failure(host string) (string, bool) {
	for _, x := range r.Results {
		if x.Host == host && (x.Status == "failed" || x.Status == "unreachable") {
			return fmt.Sprintf("%s: %s", x.Task, x.Msg), x.Handler
		}
	}
	return "", false
}

// lostKey is one "written but NOT in effect" entry of explain --json.
type lostKey struct {
	Key, File, Written, Effective, Winner, Reason, Cause string
	Absent                                               bool
}

// explainLost runs explain --json over the lab and returns, per host, the
// values written in a loaded file that are not in effect, and per host the
// error explain gave instead.
func explainLost(t *testing.T, l *labtest.Lab) (map[string][]lostKey, map[string]string) {
	t.Helper()
	r := nc(t, append([]string{"explain", "--json", "-f", "8"}, labArgs(l)...)...)
	var hosts []struct {
		Host        string `json:"host"`
		Error       string `json:"error"`
		Explanation *struct {
			Lost []lostKey `json:"lost"`
		} `json:"explanation"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &hosts); err != nil {
		t.Fatalf("explain --json: %v\n%s", err, r)
	}
	lost, errs := map[string][]lostKey{}, map[string]string{}
	for _, h := range hosts {
		if h.Error != "" {
			errs[h.Host] = firstLine(h.Error)
			continue
		}
		if h.Explanation != nil {
			lost[h.Host] = h.Explanation.Lost
		}
	}
	return lost, errs
}

// matrixPlaybook is the shipped playbook's tasks and handlers as they are,
// without serial and max_fail_percentage: each cell is its own host, and one
// cell's failure must not stop the others (the rollout guard is tested
// elsewhere).
func matrixPlaybook(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(shippedPlaybook())
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	dropped := 0
	for _, ln := range strings.Split(string(b), "\n") {
		if regexp.MustCompile(`^\s*(serial|max_fail_percentage):`).MatchString(ln) {
			dropped++
			continue
		}
		kept = append(kept, ln)
	}
	if dropped != 2 {
		t.Fatalf("the shipped playbook changed shape: dropped %d of serial/max_fail_percentage, want 2", dropped)
	}
	return writePlaybook(t, strings.Join(kept, "\n"))
}

// criPrefix is where the generation's daemon keeps the CRI runtimes in a dump.
func criPrefix(gen string) string {
	if gen == "2.x" {
		return `plugins."io.containerd.cri.v1.runtime".containerd.runtimes.`
	}
	return `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.`
}

var runtimePrefixes = []string{
	`plugins."io.containerd.grpc.v1.cri".containerd.runtimes.`,
	`plugins."io.containerd.cri.v1.runtime".containerd.runtimes.`,
}

// runtimeOf returns the runtime name and the rest of key when key lies in a
// CRI runtimes table.
func runtimeOf(key string) (name, rest string, ok bool) {
	for _, p := range runtimePrefixes {
		if !strings.HasPrefix(key, p) {
			continue
		}
		r := key[len(p):]
		if strings.HasPrefix(r, `"`) {
			end := strings.Index(r[1:], `"`)
			if end < 0 {
				return "", "", false
			}
			return r[1 : end+1], strings.TrimPrefix(r[end+2:], "."), true
		}
		if i := strings.IndexByte(r, '.'); i >= 0 {
			return r[:i], r[i+1:], true
		}
		return r, "", true
	}
	return "", "", false
}

// managed says whether key is the playbook's to change: the named runtimes,
// and the bookkeeping keys that say which files load.
func managed(key string) bool {
	if key == "version" || key == "imports" || strings.HasPrefix(key, "imports.") {
		return true
	}
	name, _, ok := runtimeOf(key)
	_, named := namedRuntimes[name]
	return ok && named
}

func unquote(s string) string { return strings.Trim(s, `"'`) }

// runtimeProblems checks the named runtimes in an effective dump: present,
// no two option keys that collide case-insensitively, and BinaryName as the
// daemon decodes it (1.x: the exact key; 2.x: case-insensitive).
func runtimeProblems(gen string, dump map[string]string) []string {
	var probs []string
	names := make([]string, 0, len(namedRuntimes))
	for n := range namedRuntimes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		want := namedRuntimes[n]
		prefix := criPrefix(gen) + ctrconf.JoinKey(n) + "."
		present := false
		folded := map[string][]string{}
		for k, v := range dump {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			present = true
			if opt, ok := strings.CutPrefix(k, prefix+"options."); ok {
				folded[strings.ToLower(opt)] = append(folded[strings.ToLower(opt)], opt+"="+v)
			}
		}
		if !present {
			probs = append(probs, "runtime "+n+" not effective")
			continue
		}
		for _, keys := range folded {
			if len(keys) > 1 {
				sort.Strings(keys)
				probs = append(probs, fmt.Sprintf("%s options collide case-insensitively: %s", n, strings.Join(keys, ", ")))
			}
		}
		var got string
		if gen == "2.x" {
			if ks := folded["binaryname"]; len(ks) == 1 {
				got = unquote(ks[0][strings.IndexByte(ks[0], '=')+1:])
			}
		} else if v, ok := decoded(gen, dump, prefix+"options.BinaryName"); ok {
			got = unquote(v)
		}
		if got != want {
			probs = append(probs, fmt.Sprintf("%s BinaryName as the daemon decodes it: %q, want %q", n, got, want))
		}
	}
	return probs
}

// declared are the values the shipped playbook's containerd_settings task
// declares, by the key the generation's dump prints them under, as text.
func declared(t *testing.T, gen string) map[string]string {
	t.Helper()
	var plays []struct {
		Tasks []map[string]any `yaml:"tasks"`
	}
	if err := yaml.Unmarshal([]byte(mustRead(t, shippedPlaybook())), &plays); err != nil {
		t.Fatal(err)
	}
	major := 1
	if gen == "2.x" {
		major = 2
	}
	out := map[string]string{}
	for _, p := range plays {
		for _, task := range p.Tasks {
			args, ok := task["containerd_settings"].(map[string]any)
			if !ok {
				continue
			}
			settings, _ := args["settings"].(map[string]any)
			for k, v := range settings {
				key, err := containerdsettings.DumpKey(k, major)
				if err != nil {
					t.Fatal(err)
				}
				out[key] = fmt.Sprint(v)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the shipped playbook declares no containerd_settings")
	}
	return out
}

// settingsProblems lists declared values the dump does not hold, an option
// read as the daemon decodes it (2.x: any spelling that folds to it).
func settingsProblems(gen string, dump, want map[string]string) []string {
	var probs []string
	for key, v := range want {
		got, ok := decoded(gen, dump, key)
		if !ok || unquote(got) != v {
			probs = append(probs, fmt.Sprintf("declared %s = %s not in effect (the node loads %s)", key, v, orGone(got, ok)))
		}
	}
	sort.Strings(probs)
	return probs
}

// decoded is the value the daemon of generation gen decodes for the key
// want (spelled as its struct field or tag) from a dump that may spell it
// otherwise, and whether any spelling is there.
//
// 2.x decodes a runtime's options with go-toml v2 (internal/cri/config
// GenerateRuntimeOptions): the options map is marshalled with its keys
// sorted, then unmarshalled into the struct matching keys in any case, so
// of several spellings the last in byte order wins (kubespray's
// `binaryName` over the default, empty `BinaryName`). 1.x decodes with
// go-toml v1, which takes the first present of the name as spelled,
// lower-cased, upper-cased and with its first letter lower-cased
// (github.com/pelletier/go-toml v1.9.5 marshal.go, valueFromTree's
// keysToTry): kubespray's `systemdCgroup` is SystemdCgroup there.
func decoded(gen string, dump map[string]string, want string) (string, bool) {
	j := strings.LastIndexByte(want, '.')
	if j < 0 || j == len(want)-1 {
		v, ok := dump[want]
		return v, ok
	}
	parent, base := want[:j+1], want[j+1:]
	if gen == "2.x" {
		best, found := "", false
		for k := range dump {
			if strings.EqualFold(k, want) && (!found || k > best) {
				best, found = k, true
			}
		}
		return dump[best], found
	}
	for _, name := range []string{base, strings.ToLower(base), strings.ToTitle(base), strings.ToLower(base[:1]) + base[1:]} {
		if v, ok := dump[parent+name]; ok {
			return v, true
		}
	}
	return "", false
}

// regressions lists the effective values the run changed that were not its
// to change: every key outside the named runtimes and the declared settings
// must keep its value, except those a shadowing file had reset, which must
// come back to what their file says.
//
// moved, when not nil, reports whether a value that is gone now lives on
// elsewhere with the same meaning (registry mirrors migrated into the
// node's hosts.toml files): that is the run's change, not a loss.
func regressions(before, after map[string]string, shadowed []lostKey, decl map[string]string, moved func(key, before string) bool) []string {
	restore := map[string]string{}
	for _, l := range shadowed {
		restore[l.Key] = l.Written
	}
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		if managed(k) {
			continue
		}
		if v, ok := decl[k]; ok && unquote(after[k]) == v {
			continue
		}
		b, inB := before[k]
		a, inA := after[k]
		if inA == inB && a == b || sameDecoded(b, inB, a, inA) || ctrconf.FilledByCRI(k, b, a) {
			continue
		}
		if w, ok := restore[k]; ok && inA && unquote(w) == unquote(a) {
			continue
		}
		if inB && !inA && moved != nil && moved(k, b) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", k, orGone(b, inB), orGone(a, inA)))
	}
	sort.Strings(out)
	return out
}

// sameDecoded: a key absent from one dump and at its zero value in the
// other decodes the same. Only maps (a runtime's options, the runtimes
// table) can lack a key in a dump, and the daemon decodes a runtime's
// options into a struct, where a missing field is its zero value.
func sameDecoded(b string, inB bool, a string, inA bool) bool {
	zero := func(v string) bool {
		switch unquote(v) {
		case "", "0", "false", "[]", "{}":
			return true
		}
		return false
	}
	switch {
	case inB && !inA:
		return zero(b)
	case inA && !inB:
		return zero(a)
	}
	return false
}

func orGone(v string, ok bool) string {
	if !ok {
		return "(absent)"
	}
	return v
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// hostDisagreement is the agreement check for one host: what check mode
// planned under /etc against what apply changed.
func hostDisagreement(planned, touched map[string][]string, host string) string {
	p := map[string][]string{}
	if ps := planned[host]; len(ps) > 0 {
		p[host] = ps
	}
	tc := map[string][]string{}
	if ts := touched[host]; len(ts) > 0 {
		tc[host] = ts
	}
	return disagreement(p, tc)
}

// runGeneration builds one lab for a containerd generation with a node per
// (config, drop-in set) cell, runs check, apply, a second apply and explain
// over all of them, and fills in each cell's outcome.
// runGeneration runs the cells on one lab of generation gen and returns it
// (still up until t ends) for callers that look at the nodes' files.
func runGeneration(t *testing.T, gen labtest.Generation, cells []*cell) *labtest.Lab {
	names := make([]string, len(cells))
	for i, c := range cells {
		names[i] = c.node
	}
	l := labtest.Start(t, labtest.Options{Names: names, Scenario: "none", ContainerdBin: labtest.Containerd(t, gen)})
	for _, c := range cells {
		setUpNode(t, l, c)
	}
	// Start every node's containerd on its files; a config the daemon
	// refuses is a baseline fact, not a test failure.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for _, c := range cells {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, _ = l.TryExec(c.node, "systemctl", "start", "containerd") // the probe below records the outcome
			c.baseline = probe(l, c.node)
		}()
	}
	wg.Wait()

	lostBefore, _ := explainLost(t, l)
	pb := matrixPlaybook(t)
	decl := declared(t, string(gen))
	dir := t.TempDir()
	cj, aj, rj := filepath.Join(dir, "check.json"), filepath.Join(dir, "apply.json"), filepath.Join(dir, "rerun.json")
	args := func(extra ...string) []string {
		return append(append([]string{"apply", "-f", "8"}, extra...), labArgs(l, pb)...)
	}
	before := snapshot(t, l)
	check := nc(t, args("--check", "--report", "json="+cj)...)
	afterCheck := snapshot(t, l)
	apply := nc(t, args("--report", "json="+aj)...)
	afterApply := snapshot(t, l)
	rerun := nc(t, args("--report", "json="+rj)...)
	afterRerun := snapshot(t, l)
	t.Logf("containerd %s: check exit %d, apply exit %d, rerun exit %d", gen, check.code, apply.code, rerun.code)
	lostAfter, explainErrs := explainLost(t, l)

	planned := plannedPaths(t, cj)
	touched := touchedPaths(before, afterApply)
	checkWrote := touchedPaths(before, afterCheck)
	rerunTouched := touchedPaths(afterApply, afterRerun)
	applyRep, rerunRep := readReport(t, aj), readReport(t, rj)

	for _, c := range cells {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.after = probe(l, c.node)
		}()
	}
	wg.Wait()

	for _, c := range cells {
		h := c.node
		if len(checkWrote[h]) > 0 {
			c.outcome, c.detail = "check-wrote", "check mode changed "+strings.Join(checkWrote[h], ", ")
			continue
		}
		if msg, handler := applyRep.failure(h); msg != "" {
			switch {
			case handler:
				c.outcome, c.detail = "rolled-back", "wrote, then the restart failed: "+msg
			case len(touched[h]) > 0:
				c.outcome, c.detail = "partial", "failed after writing "+strings.Join(touched[h], ", ")+" — "+msg
			case len(rerunTouched[h]) > 0:
				c.outcome, c.detail = "partial", "refused, then the rerun wrote "+strings.Join(rerunTouched[h], ", ")
			default:
				c.outcome, c.detail = "refused", msg
			}
			continue
		}
		var probs []string
		if d := hostDisagreement(planned, touched, h); d != "" {
			probs = append(probs, "check≠apply: "+d)
		}
		if rc := rerunRep.Recap[h]; rc.Changed > 0 || rc.Failed > 0 || len(rerunTouched[h]) > 0 {
			msg, _ := rerunRep.failure(h)
			probs = append(probs, fmt.Sprintf("rerun: %d changed, %d failed (%s)", rc.Changed, rc.Failed, msg))
		}
		if !c.after.criOK {
			probs = append(probs, "after the run: "+c.after.status)
		}
		if c.after.dump == nil {
			probs = append(probs, "no dump after the run: "+c.after.dumpErr)
		} else {
			probs = append(probs, runtimeProblems(c.gen, c.after.dump)...)
			probs = append(probs, settingsProblems(c.gen, c.after.dump, decl)...)
			eps, err := cellEndpoints(t, l, c)
			if err != nil {
				probs = append(probs, "endpoints: "+err.Error())
			}
			c.endpoints = eps
			var moved []string
			for _, r := range slices.Sorted(maps.Keys(eps)) {
				if d := eps[r]; d != "" {
					moved = append(moved, r+": "+d)
				}
			}
			if len(moved) > 0 {
				probs = append(probs, "pulls go elsewhere (containerd's resolver, legacy settings before, hosts.toml after): "+strings.Join(moved, "; "))
			}
			if c.baseline.dump != nil {
				if rs := regressions(c.baseline.dump, c.after.dump, lostBefore[h], decl, mirrorsMoved(eps)); len(rs) > 0 {
					probs = append(probs, fmt.Sprintf("%d value(s) changed that were not the run's: %s", len(rs), strings.Join(rs, "; ")))
				}
			}
		}
		if e := explainErrs[h]; e != "" {
			probs = append(probs, "explain: "+e)
		}
		var out []string
		for _, lk := range lostAfter[h] {
			// A key containerd does not know at all (no file decides it)
			// was never in effect and no run can make it so. A value a
			// later file spells differently is that file's stated choice,
			// on 1.x and 2.x alike (explain lists it as overridden); the
			// defect class is a value lost without any file saying so:
			// reset or dropped by a file that replaces the whole table.
			if lk.Winner != "" && !(lk.Cause == "overridden" && strings.HasPrefix(lk.Reason, "overridden by ")) {
				out = append(out, fmt.Sprintf("%s = %s in %s", lk.Key, lk.Written, lk.File))
			}
		}
		if len(out) > 0 {
			probs = append(probs, "written but not in effect: "+strings.Join(out, "; "))
		}
		if len(probs) == 0 {
			c.outcome = "converged"
			continue
		}
		c.outcome, c.detail = classify(probs[0]), strings.Join(probs, " | ")
		// The table cuts details short; the log keeps them whole.
		t.Logf("%s: %s: %s", c.id(), c.outcome, c.detail)
	}
	return l
}

// classify names a converge's first problem with one word for EXPECTED.
func classify(p string) string {
	switch {
	case strings.HasPrefix(p, "check≠apply"):
		return "check≠apply"
	case strings.HasPrefix(p, "rerun"):
		return "not-idempotent"
	case strings.HasPrefix(p, "after the run"), strings.HasPrefix(p, "no dump"):
		return "down"
	case strings.Contains(p, "not effective"):
		return "lost-runtime"
	case strings.Contains(p, "collide case-insensitively"), strings.Contains(p, "BinaryName as the daemon decodes"):
		return "wrong-binary"
	case strings.Contains(p, "not the run's"):
		return "changed-others"
	case strings.HasPrefix(p, "written but not in effect"):
		return "not-in-effect"
	case strings.HasPrefix(p, "pulls go elsewhere"), strings.HasPrefix(p, "endpoints:"):
		return "changed-endpoints"
	case strings.HasPrefix(p, "declared "):
		return "setting-not-in-effect"
	}
	return "failed"
}

// readExpected reads testdata/corpus/EXPECTED: "<config>/<set>/<gen> <outcome>"
// per line, # comments. A cell listed as refused may also converge.
func readExpected(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(corpusDir, "EXPECTED"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			t.Errorf("close EXPECTED: %v", err)
		}
	}()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		ln := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(ln, '#'); i >= 0 {
			ln = strings.TrimSpace(ln[:i])
		}
		if ln == "" {
			continue
		}
		f := strings.Fields(ln)
		if len(f) != 2 {
			t.Fatalf("EXPECTED:%d: want \"<config>/<set>/<gen> <outcome>\", got %q", n, ln)
		}
		out[f[0]] = f[1]
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read EXPECTED: %v", err)
	}
	return out
}

// unconverged are the classes a cell may end in without converging, each
// with why no run can converge it with the same meaning, matched on the
// cell's detail. A cell that matches none is shown as unexplained: a
// defect to look at, not a class.
var unconverged = []struct {
	match *regexp.Regexp
	why   string
}{
	{regexp.MustCompile(`is not NVIDIA's runc-based runtime`),
		"a runtime named like NVIDIA's is another runtime (gVisor's runsc): rewriting it as runc would run its pods on the host kernel, outside the sandbox, so it is not the module's to rebuild unless the play says to replace it (issue 28 #4)"},
	{regexp.MustCompile(`refusing to write a file the platform owns`),
		"the file is one a platform generates (k0s writes it again on every start): an edit would be undone on the real node; the refusal names the platform's own drop-in directory"},
	{regexp.MustCompile(`config version .[34]. is not supported`),
		"a config written for containerd 2.x (version 3) on 1.x, which does not load it (n/a)"},
}

// whyNot is the class of an unconverged cell: why no run converges it.
func whyNot(c *cell) string {
	if c.outcome == "converged" {
		return ""
	}
	for _, u := range unconverged {
		if u.match.MatchString(c.detail) {
			return u.why
		}
	}
	return "unexplained"
}

// matrixTable renders the cells as a markdown table.
func matrixTable(cells []*cell) string {
	var b strings.Builder
	counts := map[string]int{}
	perGen := map[string]map[string]int{}
	var gens []string
	for _, c := range cells {
		if c.meaningful() {
			counts[c.outcome]++
			if perGen[c.gen] == nil {
				perGen[c.gen] = map[string]int{}
				gens = append(gens, c.gen)
			}
			perGen[c.gen][c.outcome]++
		}
	}
	var kinds []string
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	b.WriteString("# Corpus matrix\n\n")
	b.WriteString("Generated by `make corpus` (e2e TestCorpusMatrix): each config in this directory x {alone, the incident's\n")
	b.WriteString("two drop-ins, only the GPU Operator's drop-in} x {containerd 1.6, 1.7, 2.x}, the shipped playbook\n")
	b.WriteString("(without `serial`/`max_fail_percentage`, so one cell cannot stop the others) applied by one run per\n")
	b.WriteString("generation. Outcomes: `converged` (named runtimes effective with the right BinaryName as the daemon\n")
	b.WriteString("decodes it, no other effective value changed except shadowed ones restored, nothing written out of\n")
	b.WriteString("effect, rerun changes nothing, check's plan = apply's changes); `refused` (failed before any write on\n")
	b.WriteString("the host); anything else is a defect: `partial` (failed after writing), `rolled-back` (wrote, the\n")
	b.WriteString("restart failed its gates, files restored), `lost-runtime`, `wrong-binary`, `changed-others`,\n")
	b.WriteString("`not-in-effect`, `not-idempotent`, `check≠apply`, `down`, `check-wrote`. The first problem names the\n")
	b.WriteString("outcome; the detail lists them all. \"Out of effect\" means reset or dropped by a file that does not\n")
	b.WriteString("spell the key (1.x's whole-table replacement, the incident's class); a value a later file spells\n")
	b.WriteString("differently is that file's stated choice on 1.x and 2.x alike (explain lists it as overridden).\n")
	b.WriteString("Cells marked n/a hold a config written for containerd 2.x on 1.x (1.6 ignores a version 3 file\n")
	b.WriteString("silently, 1.7 refuses to start on it): there is no operator setting in effect to keep; they are run\n")
	b.WriteString("and shown but not counted.\n\n")
	b.WriteString("For every converged cell of a config with registry `mirrors`, containerd's own code says where pulls go\n")
	b.WriteString("(e2e corpus_resolve_test.go): the CRI plugin's registryHosts on the config's legacy mirrors, and on the\n")
	b.WriteString("node's migrated hosts.toml files after the run, for each mirrored registry and docker.io, registry.k8s.io\n")
	b.WriteString("and quay.io; a cell whose pulls go to other endpoints, in another order or with other TLS settings is\n")
	b.WriteString("`changed-endpoints`. Every cell that does not converge names its class in the last column: why no run\n")
	b.WriteString("converges it with the same meaning (`unexplained` would be a defect).\n\n")
	b.WriteString("Counted cells:")
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s %d;", k, counts[k])
	}
	for _, g := range gens {
		fmt.Fprintf(&b, "\n- containerd %s:", g)
		for _, k := range kinds {
			if n := perGen[g][k]; n > 0 {
				fmt.Fprintf(&b, " %s %d;", k, n)
			}
		}
	}
	b.WriteString("\n\n| config | drop-ins | containerd | before the run | outcome | detail | why not converged |\n|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		base := c.baseline.status
		if c.baseline.dumpErr != "" {
			base += "; dump: " + c.baseline.dumpErr
		}
		if c.importsAdded {
			base += "; conf.d import added"
		}
		out := c.outcome
		if !c.meaningful() {
			out = "n/a (" + out + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", c.cfg.name, c.set.name, c.gen,
			strings.ReplaceAll(base, "|", `\|`), out, strings.ReplaceAll(clip(c.detail, 600), "|", `\|`), whyNot(c))
	}
	return b.String()
}

// TestCorpusMatrix runs the matrix. It fails where a cell listed in
// EXPECTED did not end as listed; every other cell is recorded only.
func TestCorpusMatrix(t *testing.T) {
	corpus := loadCorpus(t)
	expected := readExpected(t)
	// NODECONVERGE_CORPUS_ONLY (a regexp over cell ids, e.g. "/2.x$" or
	// "^kind/") runs part of the matrix while working on it; EXPECTED is
	// then checked for the cells that ran only.
	var only *regexp.Regexp
	if re := os.Getenv("NODECONVERGE_CORPUS_ONLY"); re != "" {
		var err error
		if only, err = regexp.Compile(re); err != nil {
			t.Fatalf("NODECONVERGE_CORPUS_ONLY: %v", err)
		}
	}
	gens := []struct {
		name string
		gen  labtest.Generation
	}{{"1.6", labtest.Containerd16}, {"1.7", labtest.Containerd17}, {"2.x", labtest.Containerd2}}
	var all []*cell
	for _, g := range gens {
		var cells []*cell
		for i, cfg := range corpus {
			for _, set := range dropinSets() {
				c := &cell{cfg: cfg, set: set, gen: g.name, node: fmt.Sprintf("c%02d%c", i, set.name[0])}
				if only == nil || only.MatchString(c.id()) {
					cells = append(cells, c)
				}
			}
		}
		if len(cells) == 0 {
			continue
		}
		t.Run("containerd-"+g.name, func(t *testing.T) { runGeneration(t, g.gen, cells) })
		all = append(all, cells...)
	}
	table := matrixTable(all)
	t.Log("\n" + table)
	if p := os.Getenv("NODECONVERGE_CORPUS_TABLE"); p != "" && only == nil {
		if err := os.WriteFile(p, []byte(table), 0o644); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	byID := map[string]*cell{}
	for _, c := range all {
		byID[c.id()] = c
		// Every cell left unconverged must be of a class no run can
		// converge with the same meaning (issue 28's acceptance).
		if c.meaningful() && whyNot(c) == "unexplained" {
			t.Errorf("%s: %s, of no class that cannot converge: %s", c.id(), c.outcome, c.detail)
		}
	}
	var ids []string
	for id := range expected {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c, ok := byID[id]
		if !ok && only != nil {
			continue
		}
		if !ok {
			t.Errorf("EXPECTED names %s, which is not a cell of the matrix", id)
			continue
		}
		// A converge is always at least as good as a refusal: a cell listed
		// as refused that now converges is progress, not a failure.
		if c.outcome != expected[id] && !(expected[id] == "refused" && c.outcome == "converged") {
			t.Errorf("%s: want %s, got %s: %s", id, expected[id], c.outcome, c.detail)
		}
	}
}

// TestDecoded pins the value each generation's decoder takes for a
// declared key from the spellings a dump holds (the runc options kubespray
// spells in camel case, next to 2.x's defaults).
func TestDecoded(t *testing.T) {
	const pre = `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options.`
	for _, tc := range []struct {
		gen  string
		dump map[string]string
		want string // "" for absent
	}{
		{"1.6", map[string]string{pre + "systemdCgroup": "true"}, "true"},
		{"1.6", map[string]string{pre + "SYSTEMDCGROUP": "true"}, "true"},
		{"1.6", map[string]string{pre + "SystemDCgroup": "true"}, ""},
		{"1.6", map[string]string{pre + "SystemdCgroup": "false", pre + "systemdCgroup": "true"}, "false"},
		{"1.7", map[string]string{pre + "systemd_cgroup": "true"}, ""},
		{"2.x", map[string]string{pre + "SystemDCgroup": "true"}, "true"},
		{"2.x", map[string]string{pre + "SystemdCgroup": "false", pre + "systemdCgroup": "true"}, "true"},
		{"2.x", map[string]string{pre + "systemd_cgroup": "true"}, ""},
		{"2.x", map[string]string{`plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata.options.SystemdCgroup`: "true"}, ""},
	} {
		got, ok := decoded(tc.gen, tc.dump, pre+"SystemdCgroup")
		if !ok {
			got = ""
		}
		if got != tc.want {
			t.Errorf("%s %v: decoded %q, want %q", tc.gen, tc.dump, got, tc.want)
		}
	}
}

// TestWhyNot keeps the classes of MATRIX.md's last column honest: each
// matches the message its case gives and nothing else, and a cell of no
// class is unexplained.
func TestWhyNot(t *testing.T) {
	for _, tc := range []struct{ detail, want string }{
		{`refusing to rebuild the runtimes: a runtime of a name this task manages is not NVIDIA's runc-based runtime`, "gVisor"},
		{`refusing to write a file the platform owns (an edit would be undone on the real node)`, "k0s"},
		{"level=error msg=\"containerd config version `3` is not supported, the max version is `2`\"", "version 3"},
		// A lab node's runc is its stand-in wherever a config looks (its
		// lab-links), so a runc that needs systemd is a defect, not a class.
		{`unable to apply cgroup configuration: failed to connect to dbus (hint: ...)`, "unexplained"},
		{`fork/exec /usr/local/bin/runc: no such file or directory`, "unexplained"},
		{`plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io".endpoint would both be set`, "unexplained"},
	} {
		got := whyNot(&cell{outcome: "refused", detail: tc.detail})
		if !strings.Contains(got, tc.want) {
			t.Errorf("whyNot(%q) = %q, want it to say %q", tc.detail, got, tc.want)
		}
	}
	if got := whyNot(&cell{outcome: "converged"}); got != "" {
		t.Errorf("a converged cell has a class: %q", got)
	}
}

// TestMatrixAssertions feeds the matrix's checks dumps with the defects they
// exist to catch, so a check that cannot fail is caught here.
func TestMatrixAssertions(t *testing.T) {
	p1, p2 := criPrefix("1.6"), criPrefix("2.x")
	good := func(prefix string) map[string]string {
		d := map[string]string{prefix + `runc.options.SystemdCgroup`: "true"}
		for n, bin := range namedRuntimes {
			d[prefix+n+".runtime_type"] = `"io.containerd.runc.v2"`
			d[prefix+n+".options.BinaryName"] = fmt.Sprintf("%q", bin)
		}
		return d
	}
	if p := runtimeProblems("1.6", good(p1)); len(p) != 0 {
		t.Fatalf("a good 1.x dump has problems: %v", p)
	}
	if p := runtimeProblems("2.x", good(p2)); len(p) != 0 {
		t.Fatalf("a good 2.x dump has problems: %v", p)
	}
	// 1.x reads the 2.x plugin's runtimes as nothing at all.
	if p := runtimeProblems("1.6", good(p2)); len(p) != 3 {
		t.Errorf("runtimes under the 2.x plugin on 1.6: want 3 problems, got %v", p)
	}
	// Defect 2: a second, differently-cased key that 2.x decodes too.
	d := good(p2)
	d[p2+"nvidia.options.binaryName"] = `"/usr/local/bin/runc"`
	if p := runtimeProblems("2.x", d); len(p) != 2 || classify(p[0]) != "wrong-binary" {
		t.Errorf("colliding binaryName on 2.x: got %v", p)
	}
	// 1.x ignores the lower-case key, but the collision is still written.
	d = good(p1)
	d[p1+"nvidia.options.binaryName"] = `"/usr/local/bin/runc"`
	if p := runtimeProblems("1.6", d); len(p) != 1 {
		t.Errorf("colliding binaryName on 1.x: want the collision only, got %v", p)
	}
	d = good(p1)
	delete(d, p1+"nvidia-cdi.options.BinaryName")
	delete(d, p1+"nvidia-cdi.runtime_type")
	if p := runtimeProblems("1.6", d); len(p) != 1 || classify(p[0]) != "lost-runtime" {
		t.Errorf("a missing runtime: got %v", p)
	}

	before := map[string]string{
		p1 + "runc.options.SystemdCgroup":                   "true",
		p1 + "runc.options.BinaryName":                      `""`,
		p1 + `"nvidia-experimental".options.BinaryName`:     `"/usr/bin/nvidia-container-runtime-experimental"`,
		`plugins."io.containerd.grpc.v1.cri".sandbox_image`: `"registry.k8s.io/pause:3.6"`,
		"imports": `["/etc/containerd/conf.d/*.toml"]`,
	}
	after := map[string]string{
		p1 + "runc.options.SystemdCgroup":                   "true",
		`plugins."io.containerd.grpc.v1.cri".sandbox_image`: `"registry.k8s.io/pause:3.9"`,
		p1 + "nvidia.options.BinaryName":                    `"/usr/local/nvidia/toolkit/nvidia-container-runtime"`,
		"imports":                                           `[]`,
	}
	shadowed := []lostKey{{Key: `plugins."io.containerd.grpc.v1.cri".sandbox_image`, Written: `"registry.k8s.io/pause:3.9"`}}
	rs := regressions(before, after, shadowed, nil, nil)
	// Only the deleted runtime of somebody else counts: the zero-valued
	// option that went absent decodes the same, the shadowed sandbox_image
	// came back to what its file says, imports and nvidia are the run's.
	if len(rs) != 1 || !strings.Contains(rs[0], "nvidia-experimental") {
		t.Errorf("regressions = %v, want only the deleted nvidia-experimental", rs)
	}
	if rs := regressions(before, after, nil, nil, nil); len(rs) != 2 {
		t.Errorf("without the shadowing, sandbox_image changing is a regression too: %v", rs)
	}
	// A declared value that changed to what was declared is the run's; one
	// that changed to anything else is not.
	decl := map[string]string{`plugins."io.containerd.grpc.v1.cri".sandbox_image`: "registry.k8s.io/pause:3.9"}
	if rs := regressions(before, after, nil, decl, nil); len(rs) != 1 {
		t.Errorf("a declared sandbox_image reaching its declared value is not a regression: %v", rs)
	}
	decl[`plugins."io.containerd.grpc.v1.cri".sandbox_image`] = "registry.k8s.io/pause:3.10"
	if rs := regressions(before, after, nil, decl, nil); len(rs) != 2 {
		t.Errorf("a declared value reaching another value is a regression: %v", rs)
	}
	// Mirrors that went are a regression unless they moved with the same
	// meaning.
	mk := `plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io".endpoint`
	mb := map[string]string{mk: `["https://mirror.gcr.io"]`}
	if rs := regressions(mb, map[string]string{}, nil, nil, func(string, string) bool { return false }); len(rs) != 1 {
		t.Errorf("mirrors gone without hosts.toml: %v", rs)
	}
	if rs := regressions(mb, map[string]string{}, nil, nil, func(k, b string) bool { return k == mk }); len(rs) != 0 {
		t.Errorf("mirrors moved into hosts.toml: %v", rs)
	}
	if ps := settingsProblems("1.6", after, decl); len(ps) != 1 || classify(ps[0]) != "setting-not-in-effect" {
		t.Errorf("settingsProblems = %v, want the sandbox_image that is not the declared one", ps)
	}
	if ps := settingsProblems("2.x", map[string]string{p2 + "runc.options.systemdcgroup": "true"}, map[string]string{p2 + "runc.options.SystemdCgroup": "true"}); len(ps) != 0 {
		t.Errorf("2.x reads an option in any case: %v", ps)
	}
	if d := declared(t, "2.x"); d[`plugins."io.containerd.cri.v1.images".registry.config_path`] != "/etc/containerd/certs.d" {
		t.Errorf("the shipped playbook's declared config_path under 2.x's name: %v", d)
	}
	if name, rest, ok := runtimeOf(p2 + `"nvidia.x".options.BinaryName`); !ok || name != "nvidia.x" || rest != "options.BinaryName" {
		t.Errorf("runtimeOf quoted name = %q %q %v", name, rest, ok)
	}
	if managed(p1+`"nvidia-experimental".runtime_type`) || !managed(p1+"nvidia-legacy.runtime_type") {
		t.Error("managed must cover the named runtimes only")
	}
}
