package ctrconf

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/lab/labtest"
)

const (
	cri        = "io.containerd.grpc.v1.cri"
	criKey     = `plugins."io.containerd.grpc.v1.cri"`
	runtimes   = criKey + ".containerd.runtimes"
	nvidiaBin  = runtimes + ".nvidia.options.BinaryName"
	systemd    = runtimes + ".runc.options.SystemdCgroup"
	sandbox    = criKey + ".sandbox_image"
	configPath = criKey + ".registry.config_path"
)

const mainTOML = `version = 2
imports = ["%CONFD%/*.toml"]

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = true
`

// nvidiaTOML is what the GPU Operator's toolkit writes: the whole CRI table
// it found, plus its three runtimes.
const nvidiaTOML = `version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
            BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
            SystemdCgroup = true
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi.options]
            BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"
            SystemdCgroup = true
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-legacy]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-legacy.options]
            BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy"
            SystemdCgroup = true
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
`

const zzTOML = `# LabHub: trust the Harbor (HTTP) registry
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
`

// incident lays the incident's tree out under a temp dir and returns the
// main config path and the conf.d dir.
func incident(t *testing.T) (mainPath, confd string) {
	t.Helper()
	root := t.TempDir()
	confd = filepath.Join(root, "etc/containerd/conf.d")
	mainPath = filepath.Join(root, "etc/containerd/config.toml")
	write(t, mainPath, strings.ReplaceAll(mainTOML, "%CONFD%", confd))
	write(t, filepath.Join(confd, "99-nvidia.toml"), nvidiaTOML)
	write(t, filepath.Join(confd, "zz-labhub-registry.toml"), zzTOML)
	return mainPath, confd
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gather(t *testing.T, h *localReader, mainPath string) *Tree {
	t.Helper()
	tree, err := Gather(context.Background(), h, mainPath, "")
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	return tree
}

func hasPrefixKey(flat map[string]string, prefix string) bool {
	for k := range flat {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func TestGatherIncident(t *testing.T) {
	mainPath, confd := incident(t)
	h := newLocal(t)
	tree := gather(t, h, mainPath)
	if got := h.queries.Load(); got != 2 {
		t.Errorf("Gather used %d Query round trips, want 2", got)
	}
	var paths []string
	for _, f := range tree.Files {
		paths = append(paths, f.Path)
	}
	want := []string{mainPath, filepath.Join(confd, "99-nvidia.toml"), filepath.Join(confd, "zz-labhub-registry.toml")}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("load order (-want +got):\n%s", diff)
	}
	if tree.Version != 2 {
		t.Errorf("Version = %d, want 2", tree.Version)
	}
	if !strings.Contains(tree.BinVersion, "1.6") {
		t.Errorf("BinVersion = %q, want the node's containerd 1.6", tree.BinVersion)
	}
	if diff := cmp.Diff([]string{filepath.Join(confd, "*.toml")}, tree.Imports); diff != "" {
		t.Errorf("Imports (-want +got):\n%s", diff)
	}
	for _, f := range tree.Files {
		if !f.Parses || f.Missing {
			t.Errorf("%s: Parses=%v Missing=%v %s", f.Path, f.Parses, f.Missing, f.ParseErr)
		}
		if diff := cmp.Diff([]string{cri}, f.Plugins); diff != "" {
			t.Errorf("%s plugins (-want +got):\n%s", f.Path, diff)
		}
	}
}

func TestIncidentDumpAndAblate(t *testing.T) {
	ctx := context.Background()
	mainPath, confd := incident(t)
	h := newLocal(t)
	tree := gather(t, h, mainPath)
	zz := filepath.Join(confd, "zz-labhub-registry.toml")
	nvidia := filepath.Join(confd, "99-nvidia.toml")

	// Staging must not read live files: take conf.d away before dumping.
	if err := os.RemoveAll(confd); err != nil {
		t.Fatal(err)
	}

	effs, err := DumpMany(ctx, h, tree, []Overrides{nil, {zz: nil}, {nvidia: nil}})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.stages.Load(); got != 1 {
		t.Errorf("DumpMany used %d Stage round trips, want 1", got)
	}
	base, noZZ, noNvidia := effs[0], effs[1], effs[2]
	for i, e := range effs {
		if !e.OK {
			t.Fatalf("dump %d failed: %s", i, e.Err)
		}
	}
	if hasPrefixKey(base.Flat(), runtimes+".nvidia") {
		t.Errorf("the incident's effective config has an nvidia runtime; containerd 1.6 drops them")
	}
	if v, _ := base.Get(configPath); v != `"/etc/containerd/certs.d"` {
		t.Errorf("config_path = %s", v)
	}
	if v, _ := noZZ.Get(nvidiaBin); v != `"/usr/local/nvidia/toolkit/nvidia-container-runtime"` {
		t.Errorf("without zz: nvidia BinaryName = %q", v)
	}
	if diff := cmp.Diff([]string{mainPath, nvidia}, noZZ.Files); diff != "" {
		t.Errorf("files loaded without zz (-want +got):\n%s", diff)
	}

	// Removing zz: config_path stays (99-nvidia carries it), the nvidia
	// runtimes come back.
	changes := Diff(base, noZZ)
	byKey := map[string]module.EffectiveChange{}
	for _, c := range changes {
		byKey[c.Key] = c
	}
	if c, ok := byKey[configPath]; ok {
		t.Errorf("removing zz changes config_path: %+v", c)
	}
	if c := byKey[nvidiaBin]; c.Before != "" || c.After != `"/usr/local/nvidia/toolkit/nvidia-container-runtime"` {
		t.Errorf("Diff for %s = %+v", nvidiaBin, c)
	}
	// imports and version describe the tree, not the daemon: a drop-in
	// added or removed must not read as a changed setting (issue 10, 3).
	for _, k := range []string{"imports", "version"} {
		if c, ok := byKey[k]; ok {
			t.Errorf("Diff shows %s as a changed setting: %+v", k, c)
		}
	}
	for i := 1; i < len(changes); i++ {
		if changes[i-1].Key >= changes[i].Key {
			t.Fatalf("Diff not sorted: %q before %q", changes[i-1].Key, changes[i].Key)
		}
	}
	// Removing 99-nvidia while zz is there changes nothing about the CRI
	// plugin: zz owns it either way.
	for _, c := range Diff(base, noNvidia) {
		if pluginOf(c.Key) == cri {
			t.Errorf("removing 99-nvidia changed %+v", c)
		}
	}

	// Ablate measures the same thing in one more Stage.
	b, shadows, err := Ablate(ctx, h, tree, "")
	if err != nil {
		t.Fatal(err)
	}
	if !b.OK || h.stages.Load() != 2 {
		t.Fatalf("Ablate: base OK=%v, stages=%d", b.OK, h.stages.Load())
	}
	if len(shadows) != 1 || shadows[0].File != zz || shadows[0].Plugin != cri {
		t.Fatalf("shadows = %+v, want one for %s in %s", shadows, zz, cri)
	}
	restored := map[string]module.EffectiveChange{}
	for _, c := range shadows[0].Restored {
		restored[c.Key] = c
	}
	for key, want := range map[string]module.EffectiveChange{
		nvidiaBin: {Key: nvidiaBin, After: `"/usr/local/nvidia/toolkit/nvidia-container-runtime"`},
		runtimes + ".nvidia-cdi.options.BinaryName":    {Key: runtimes + ".nvidia-cdi.options.BinaryName", After: `"/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"`},
		runtimes + ".nvidia-legacy.options.BinaryName": {Key: runtimes + ".nvidia-legacy.options.BinaryName", After: `"/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy"`},
		systemd: {Key: systemd, Before: "false", After: "true"},
		sandbox: {Key: sandbox, Before: `"registry.k8s.io/pause:3.6"`, After: `"registry.k8s.io/pause:3.9"`},
	} {
		if diff := cmp.Diff(want, restored[key]); diff != "" {
			t.Errorf("restored %s (-want +got):\n%s", key, diff)
		}
	}
	if _, ok := restored[configPath]; ok {
		t.Errorf("config_path is reported as restored, but zz writes it itself")
	}
}

func TestExplainIncident(t *testing.T) {
	mainPath, confd := incident(t)
	h := newLocal(t)
	x, err := Explain(context.Background(), h, mainPath, "")
	if err != nil {
		t.Fatal(err)
	}
	if h.queries.Load() != 2 || h.stages.Load() != 1 {
		t.Errorf("Explain used %d queries and %d stages, want 2 and 1", h.queries.Load(), h.stages.Load())
	}
	zz := filepath.Join(confd, "zz-labhub-registry.toml")
	nvidia := filepath.Join(confd, "99-nvidia.toml")
	if !x.OK {
		t.Fatalf("Explain: %s", x.Err)
	}
	if x.Owners[cri] != zz {
		t.Errorf("owner of %s = %q, want %s", cri, x.Owners[cri], zz)
	}
	origins := map[string]KeyOrigin{}
	for _, k := range x.Keys {
		origins[k.Key] = k
	}
	if o := origins[configPath]; o.File != zz {
		t.Errorf("config_path origin = %+v, want %s", o, zz)
	}
	if o := origins[sandbox]; !o.Default || o.File != "" || o.ResetBy != zz {
		t.Errorf("sandbox_image origin = %+v, want default reset by zz", o)
	}
	if o := origins["root"]; !o.Default || o.File != "" || o.ResetBy != "" {
		t.Errorf("root origin = %+v, want plain default", o)
	}
	lost := map[string]LostKey{}
	for _, l := range x.Lost {
		lost[l.File+" "+l.Key] = l
	}
	for _, want := range []LostKey{
		{Key: nvidiaBin, File: nvidia, Written: `"/usr/local/nvidia/toolkit/nvidia-container-runtime"`, Absent: true, Winner: zz, Cause: CauseDropped},
		{Key: runtimes + ".nvidia-cdi.runtime_type", File: nvidia, Written: `"io.containerd.runc.v2"`, Absent: true, Winner: zz, Cause: CauseDropped},
		{Key: systemd, File: nvidia, Written: "true", Effective: "false", Winner: zz, Cause: CauseReset},
		{Key: systemd, File: mainPath, Written: "true", Effective: "false", Winner: zz, Cause: CauseReset},
		{Key: sandbox, File: nvidia, Written: `"registry.k8s.io/pause:3.9"`, Effective: `"registry.k8s.io/pause:3.6"`, Winner: zz, Cause: CauseReset},
	} {
		got, ok := lost[want.File+" "+want.Key]
		if !ok {
			t.Errorf("not reported lost: %s in %s", want.Key, want.File)
			continue
		}
		got.Reason = ""
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lost %s (-want +got):\n%s", want.Key, diff)
		}
	}
	if _, ok := lost[zz+" "+configPath]; ok {
		t.Errorf("zz's config_path reported lost")
	}
	if len(x.Shadows) != 1 || x.Shadows[0].File != zz {
		t.Errorf("shadows = %+v", x.Shadows)
	}
}

func TestDuplicatedTables(t *testing.T) {
	mainPath, _ := incident(t)
	// The wrong turn of the incident: the nvidia block appended twice.
	block := "\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n  runtime_type = \"io.containerd.runc.v2\"\n"
	orig, err := os.ReadFile(mainPath)
	if err != nil {
		t.Fatal(err)
	}
	// A multi-line imports array: the staged copy must keep line numbers.
	orig = []byte(strings.Replace(string(orig), "imports = [", "imports = [\n  ", 1))
	orig = []byte(strings.Replace(string(orig), `.toml"]`, ".toml\",\n]", 1))
	write(t, mainPath, string(orig)+block+block)
	h := newLocal(t)
	tree := gather(t, h, mainPath)
	if tree.Files[0].Parses || tree.Files[0].ParseErr == "" {
		t.Errorf("main Parses=%v err=%q", tree.Files[0].Parses, tree.Files[0].ParseErr)
	}
	if len(tree.Files) != 3 {
		t.Errorf("imports of a broken main were not followed: %d files", len(tree.Files))
	}
	effs, err := DumpMany(context.Background(), h, tree, []Overrides{nil, {mainPath: orig}})
	if err != nil {
		t.Fatal(err)
	}
	if effs[0].OK || !strings.Contains(effs[0].Err, "duplicated tables") || !strings.Contains(effs[0].Err, mainPath) {
		t.Errorf("broken main: OK=%v Err=%q, want duplicated tables in %s", effs[0].OK, effs[0].Err, mainPath)
	}
	if !strings.Contains(effs[0].Err, "(19, 2)") {
		t.Errorf("error position does not match the live file's line: %q", effs[0].Err)
	}
	if !effs[1].OK {
		t.Errorf("the repaired candidate does not load: %s", effs[1].Err)
	}
	x, err := Explain(context.Background(), h, mainPath, "")
	if err != nil {
		t.Fatal(err)
	}
	if x.OK || len(x.Unparseable) != 1 || x.Unparseable[0].File != mainPath || x.Owners[cri] == "" {
		t.Errorf("Explain of a broken tree: %+v", x)
	}
}

func TestRedact(t *testing.T) {
	for key, want := range map[string]bool{
		criKey + `.registry.auths."harbor.lab".password`:             true,
		criKey + `.registry.configs."harbor.lab".auth.auth`:          true,
		criKey + `.registry.configs."harbor.lab".auth.identitytoken`: true,
		criKey + ".registry.config_path":                             false,
		systemd:                                                      false,
	} {
		if got := Redact(key); got != want {
			t.Errorf("Redact(%s) = %v, want %v", key, got, want)
		}
	}

	mainPath, confd := incident(t)
	h := newLocal(t)
	tree := gather(t, h, mainPath)
	secret := func(pw string) Overrides {
		return Overrides{filepath.Join(confd, "zzz-auth.toml"): []byte(
			"[plugins.\"io.containerd.grpc.v1.cri\".registry.auths.\"harbor.lab\"]\n  password = \"" + pw + "\"\n")}
	}
	effs, err := DumpMany(context.Background(), h, tree, []Overrides{secret("hunter2"), secret("s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	key := criKey + `.registry.auths."harbor.lab".password`
	if v, ok := effs[0].Get(key); !ok || v != `"hunter2"` {
		t.Fatalf("a candidate file matched by the glob was not loaded: %s = %q", key, v)
	}
	if v := effs[0].Flat()[key]; v != Redacted {
		t.Errorf("Flat shows %s = %q", key, v)
	}
	if v := Flatten(effs[0].Values)[key]; v != Redacted {
		t.Errorf("Flatten shows %s = %q", key, v)
	}
	d := Diff(effs[0], effs[1])
	want := []module.EffectiveChange{{Key: key, Before: Redacted, After: Redacted}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Diff of a changed password (-want +got):\n%s", diff)
	}
}

func TestNestedAndExplicitImports(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	mainPath := filepath.Join(root, "config.toml")
	// main imports a.toml by relative name; a.toml imports b.toml.
	write(t, mainPath, "version = 2\nimports = [\n  \"a.toml\",\n]\noom_score = 1\n")
	write(t, filepath.Join(root, "a.toml"), "imports = [\"sub/b.toml\"]\noom_score = 2\n")
	write(t, filepath.Join(root, "sub/b.toml"), "oom_score = 3\n")
	h := newLocal(t)
	tree := gather(t, h, mainPath)
	if len(tree.Files) != 3 || tree.Files[2].Path != filepath.Join(root, "sub/b.toml") {
		t.Fatalf("nested import not followed: %+v", tree.Files)
	}
	a := filepath.Join(root, "a.toml")
	effs, err := DumpMany(ctx, h, tree, []Overrides{nil, {a: nil}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := effs[0].Get("oom_score"); v != "3" {
		t.Errorf("oom_score = %q, want 3 from the nested import", v)
	}
	// Removing a file that is imported by name fails as it would live.
	if effs[1].OK || !strings.Contains(effs[1].Err, a) || !strings.Contains(effs[1].Err, "no such file") {
		t.Errorf("removing an explicitly imported file: OK=%v Err=%q", effs[1].OK, effs[1].Err)
	}
	// Ablation leaves the import line out too.
	base, shadows, err := Ablate(ctx, h, tree, "")
	if err != nil || !base.OK {
		t.Fatalf("Ablate: %v %+v", err, base)
	}
	for _, s := range shadows {
		if s.File == a || s.File == filepath.Join(root, "sub/b.toml") {
			for _, c := range s.Restored {
				if c.Key == "oom_score" {
					t.Errorf("%s reported as shadowing oom_score, which it writes itself", s.File)
				}
			}
		}
	}
	x, err := ExplainTree(ctx, h, tree)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range x.Keys {
		if k.Key == "oom_score" && (k.File != filepath.Join(root, "sub/b.toml") || k.Value != "3") {
			t.Errorf("oom_score origin = %+v", k)
		}
	}
}

// TestStagedEqualsLive holds staging to the real thing: for a tree with a
// hidden drop-in (Go's glob matches it, a shell's `*` does not), a nested
// relative import and a multi-line imports array, the staged dump equals
// containerd's dump of the live files.
func TestStagedEqualsLive(t *testing.T) {
	mainPath, confd := incident(t)
	write(t, mainPath, strings.Replace(string(must(os.ReadFile(mainPath))), "imports = [", "imports = [\n  \"extra/x.toml\",\n  ", 1))
	write(t, filepath.Join(filepath.Dir(mainPath), "extra/x.toml"), "imports = [\"y.toml\"]\noom_score = 5\n")
	write(t, filepath.Join(filepath.Dir(mainPath), "extra/y.toml"), "[plugins.\"io.containerd.gc.v1.scheduler\"]\n  pause_threshold = 0.05\n")
	write(t, filepath.Join(confd, ".00-hidden.toml"), "oom_score = -7\n")
	h := newLocal(t)
	tree := gather(t, h, mainPath)
	if tree.File(filepath.Join(confd, ".00-hidden.toml")) == nil || tree.File(filepath.Join(filepath.Dir(mainPath), "extra/y.toml")) == nil {
		t.Fatalf("tree misses files containerd loads: %+v", tree.Files)
	}
	staged, err := Dump(context.Background(), h, tree, nil)
	if err != nil || !staged.OK {
		t.Fatalf("Dump: %v %+v", err, staged)
	}
	out, err := exec.Command("containerd", "--config", mainPath, "config", "dump").Output()
	if err != nil {
		t.Fatalf("live dump: %v", err)
	}
	var live map[string]any
	if err := toml.Unmarshal(out, &live); err != nil {
		t.Fatal(err)
	}
	want, got := flatten(live), staged.flat()
	delete(want, "imports") // live lists the same files in map order
	if len(got["imports"]) == 0 || strings.Contains(got["imports"], "nc-") {
		t.Errorf("staged imports not mapped to live paths: %s", got["imports"])
	}
	delete(got, "imports")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("staged dump differs from the live one (-live +staged):\n%s", diff)
	}
	if got["oom_score"] != "-7" {
		t.Errorf("oom_score = %s, want -7 (the hidden drop-in loads after extra/x.toml)", got["oom_score"])
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Issue 11, item 11: containerd 2.x's `config dump` exits 0 when a path its
// import glob matches is a dangling symlink, and prints the config without
// it and every file after it; the daemon refuses the tree. Gather records
// why each such path cannot be loaded, and Explain never presents that
// dump as what the daemon runs.
func TestUnloadableImportsAreNotProof(t *testing.T) {
	mainPath, confd := incident(t)
	if err := os.Symlink(filepath.Join(confd, "gone"), filepath.Join(confd, "40-gone.toml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(confd, "50-dir.toml"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newLocal(t)
	tree, err := Gather(context.Background(), h, mainPath, labtest.Containerd(t, labtest.Containerd2))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range tree.Undecidable() {
		got[filepath.Base(u.Path)] = u.Why
	}
	if diff := cmp.Diff(map[string]string{"40-gone.toml": "is a dangling symlink", "50-dir.toml": "is a directory"}, got); diff != "" {
		t.Fatalf("Undecidable (-want +got):\n%s", diff)
	}
	x, err := ExplainTree(context.Background(), h, tree)
	if err != nil {
		t.Fatal(err)
	}
	if x.OK || !strings.Contains(x.Err, "40-gone.toml") || len(x.Unloadable) != 2 {
		t.Fatalf("Explain took 2.x's dump of a tree the daemon refuses as loading: ok=%v err=%q unloadable=%v", x.OK, x.Err, x.Unloadable)
	}
}
