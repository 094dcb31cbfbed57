package ctrconf

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

// mainV3 is a version 3 main config (EKS AL2023's shape) with its own
// sandbox image, registry config_path and runc options.
const mainV3 = `version = 3
imports = ["%CONFD%/*.toml"]
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = 'registry.k8s.io/pause:3.10'
[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = '/etc/containerd/certs.d:/etc/docker/certs.d'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
`

// TestVersion2DropinUnderVersion3Main: containerd 2.x migrates the GPU
// Operator's version 2 drop-in on its own, so its sandbox_image, registry
// and runc options override the main config's under their 2.x names. Explain
// must credit the drop-in (overridden by it, not "changed when it was
// loaded"), and must not call the drop-in's own values never effective.
func TestVersion2DropinUnderVersion3Main(t *testing.T) {
	bin := labtest.Containerd(t, labtest.Containerd2)
	root := t.TempDir()
	confd := filepath.Join(root, "conf.d")
	mainPath := filepath.Join(root, "config.toml")
	write(t, mainPath, strings.ReplaceAll(mainV3, "%CONFD%", confd))
	nvidia := filepath.Join(confd, "99-nvidia.toml")
	write(t, nvidia, nvidiaTOML)
	x, err := Explain(context.Background(), newLocal(t), mainPath, bin)
	if err != nil {
		t.Fatal(err)
	}
	if !x.OK {
		t.Fatalf("Explain: %s", x.Err)
	}
	origins := map[string]KeyOrigin{}
	for _, k := range x.Keys {
		origins[k.Key] = k
	}
	for _, k := range []string{
		`plugins."io.containerd.cri.v1.images".pinned_images.sandbox`,
		`plugins."io.containerd.cri.v1.images".registry.config_path`,
		`plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options.SystemdCgroup`,
		`plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options.BinaryName`,
	} {
		if o := origins[k]; o.File != nvidia || o.Inferred {
			t.Errorf("%s: origin %+v, want written by %s (not inferred)", k, o, nvidia)
		}
	}
	for _, l := range x.Lost {
		switch {
		case l.File == nvidia && !strings.Contains(l.Key, "runtime_engine") && !strings.Contains(l.Key, "runtime_root"):
			t.Errorf("the drop-in's own value reported lost: %+v", l)
		case l.File == mainPath && l.Reason != "overridden by "+nvidia:
			t.Errorf("main config value: %+v, want overridden by %s", l, nvidia)
		}
	}
}

// TestArrayOfTablesAsDecoded: containerd 1.7's default config spells
// transfer's unpack_config with three fields; a 2.x dump shows every field
// of the struct. The value is in effect.
func TestArrayOfTablesAsDecoded(t *testing.T) {
	written := `[{differ = "walking", platform = "linux/amd64", snapshotter = "overlayfs"}]`
	for _, c := range []struct {
		eff  string
		want bool
	}{
		{`[{config_type = "", differ = "walking", layer_types = [], optional = false, platform = "linux/amd64", snapshotter = "overlayfs"}]`, true},
		{`[{config_type = "", differ = "walking", layer_types = [], optional = true, platform = "linux/amd64", snapshotter = "overlayfs"}]`, false},
		{`[{differ = "walking", platform = "linux/arm64", snapshotter = "overlayfs"}]`, false},
		{`[]`, false},
	} {
		if got := sameDecoded(c.eff, written); got != c.want {
			t.Errorf("sameDecoded(%s) = %v, want %v", c.eff, got, c.want)
		}
	}
}

func TestMigratedKey(t *testing.T) {
	g := `plugins."io.containerd.grpc.v1.cri".`
	for _, c := range []struct {
		key, value     string
		ver, major     int
		wantKey, wantV string
		wantOK         bool
	}{
		{g + "sandbox_image", `"p"`, 2, 2, `plugins."io.containerd.cri.v1.images".pinned_images.sandbox`, `"p"`, true},
		{g + "registry.config_path", `"d"`, 2, 2, `plugins."io.containerd.cri.v1.images".registry.config_path`, `"d"`, true},
		{g + "containerd.snapshotter", `"o"`, 0, 2, `plugins."io.containerd.cri.v1.images".snapshotter`, `"o"`, true},
		{g + "containerd.runtimes.runc.options.SystemdCgroup", "true", 2, 2, `plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options.SystemdCgroup`, "true", true},
		{g + "cni.bin_dir", `"/opt/cni/bin"`, 2, 2, `plugins."io.containerd.cri.v1.runtime".cni.bin_dirs`, `["/opt/cni/bin"]`, true},
		{g + "stream_server_port", `"0"`, 2, 2, "", "", false},
		{g + "sandbox_image", `"p"`, 2, 1, "", "", false},
		{g + "sandbox_image", `"p"`, 3, 2, "", "", false},
	} {
		k, v, ok := migratedKey(c.key, c.value, c.ver, c.major)
		if k != c.wantKey || v != c.wantV || ok != c.wantOK {
			t.Errorf("migratedKey(%s, v%d, %d.x) = %s %s %v, want %s %s %v", c.key, c.ver, c.major, k, v, ok, c.wantKey, c.wantV, c.wantOK)
		}
	}
}

// TestNotLostOnceValidated: two things a 1.x run leaves that `config dump`
// shows differently but the CRI plugin loads the same (measured on the
// corpus with 1.7): a runtime whose table moved to a file that does not say
// sandbox_mode (the dump prints "", the CRI plugin's validation makes it
// "podsandbox"), and the empty runtimes table left in a file whose runtimes
// moved out. Neither is a value written and not in effect.
func TestNotLostOnceValidated(t *testing.T) {
	bin := labtest.Containerd(t, labtest.Containerd17)
	root := t.TempDir()
	confd := filepath.Join(root, "conf.d")
	mainPath := filepath.Join(root, "config.toml")
	write(t, mainPath, `version = 2
imports = ["`+confd+`/*.toml"]
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
`)
	write(t, filepath.Join(confd, "10-runc.toml"), `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  sandbox_mode = "podsandbox"
`)
	write(t, filepath.Join(confd, "99-nvidia.toml"), `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`)
	x, err := Explain(context.Background(), newLocal(t), mainPath, bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range x.Lost {
		if strings.HasSuffix(l.Key, ".sandbox_mode") || strings.HasSuffix(l.Key, ".runtimes") {
			t.Errorf("lost: %+v", l)
		}
	}
	for _, c := range []struct {
		key, a, b string
		want      bool
	}{
		{`plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.sandbox_mode`, `""`, `"podsandbox"`, true},
		{`plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.sandboxer`, `'podsandbox'`, `""`, true},
		{`plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.sandbox_mode`, `""`, `"shim"`, false},
		{`plugins."io.containerd.grpc.v1.cri".sandbox_mode`, `""`, `"podsandbox"`, false},
	} {
		if got := FilledByCRI(c.key, c.a, c.b); got != c.want {
			t.Errorf("FilledByCRI(%s, %s, %s) = %v", c.key, c.a, c.b, got)
		}
	}
}

// TestOverrideUnderMigratedNameIsNoShadow (found with nvidia-ctk on 2.x): a
// drop-in that writes registry.config_path = "" (nvidia-ctk copies the CRI
// table whole) and a later unversioned drop-in that writes the lab's
// config_path. Leaving the later one out brings "" back, but it writes the
// key itself (under the name 2.x migrates it to): an override, not a shadow.
func TestOverrideUnderMigratedNameIsNoShadow(t *testing.T) {
	bin := labtest.Containerd(t, labtest.Containerd2)
	root := t.TempDir()
	confd := filepath.Join(root, "conf.d")
	mainPath := filepath.Join(root, "config.toml")
	write(t, mainPath, "version = 2\nimports = [\""+confd+"/*.toml\"]\n")
	write(t, filepath.Join(confd, "99-nvidia.toml"), "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"\"\n")
	write(t, filepath.Join(confd, "zz-labhub-registry.toml"), "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n")
	h := newLocal(t)
	tree, err := Gather(context.Background(), h, mainPath, bin)
	if err != nil {
		t.Fatal(err)
	}
	base, shadows, err := Ablate(context.Background(), h, tree, "")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := base.Get(`plugins."io.containerd.cri.v1.images".registry.config_path`); v != `"/etc/containerd/certs.d"` {
		t.Fatalf("effective config_path = %s", v)
	}
	for _, s := range shadows {
		t.Errorf("%s reported as shadowing %v", s.File, s.Restored)
	}
}

// TestDiffIgnoresFilledByCRI: an effective diff never reports a runtime's
// sandbox_mode going from podsandbox to "" (containerd_settings refused the
// 1.7 cells of the v1 config for it after carrying runc into a file).
func TestDiffIgnoresFilledByCRI(t *testing.T) {
	k := `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.sandbox_mode`
	if d := diffFlat(map[string]string{k: `"podsandbox"`}, map[string]string{k: `""`}); len(d) != 0 {
		t.Errorf("diff = %v", d)
	}
	if d := diffFlat(map[string]string{k: `"podsandbox"`}, map[string]string{k: `"shim"`}); len(d) != 1 {
		t.Errorf("a real change must show: %v", d)
	}
}
