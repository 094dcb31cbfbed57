package nvidiatoml

import (
	"os/exec"
	"strings"
	"testing"
)

func TestDetectVersion(t *testing.T) {
	for src, want := range map[string]int{
		"":                             0,
		"version = 2\n":                2,
		"# c\r\nversion=3 # three\r\n": 3,
		"root = \"/x\"\n[plugins]\nversion = 2\n": 0,
		"version = \"2\"\n":                       0,
		// Duplicated tables do not stop it.
		"version = 2\n[a]\n[a]\n": 2,
	} {
		if got := DetectVersion([]byte(src)); got != want {
			t.Errorf("DetectVersion(%q) = %d, want %d", src, got, want)
		}
	}
}

func TestRuntimesPrefix(t *testing.T) {
	for v, want := range map[int]string{
		2: `plugins."io.containerd.grpc.v1.cri".containerd.runtimes`,
		3: `plugins."io.containerd.cri.v1.runtime".containerd.runtimes`,
		1: `plugins.cri.containerd.runtimes`,
		4: "",
	} {
		if got := (Layout{Version: v}).RuntimesPrefix(); got != want {
			t.Errorf("version %d: %q, want %q", v, got, want)
		}
	}
}

// TestIsManaged (issue 10, defect 7): only the named runtimes are the
// module's; k3s's nvidia-experimental and microk8s's
// nvidia-container-runtime are not, though they start with "nvidia".
func TestIsManaged(t *testing.T) {
	is := IsManaged([]string{"gpu", "nvidia", "nvidia-cdi"})
	for name, want := range map[string]bool{"nvidia": true, "nvidia-cdi": true, "nvidiax": false, "gpu": true, "runc": false, "my-nvidia": false, "NVIDIA": false,
		"nvidia-experimental": false, "nvidia-container-runtime": false, "nvidia-legacy": false} {
		if got := is(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}

func TestStripCountsAndDefault(t *testing.T) {
	src := "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n" +
		"  default_runtime_name = \"nvidia\"\n" +
		"  runtimes.nvidia.runtime_type = \"x\"\n" +
		"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n" +
		"  a = 1\n  b = 2\n" +
		"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n"
	is := IsManaged([]string{"nvidia"})
	out, n := Strip([]byte(src), is, StripOptions{})
	if want := "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"nvidia\"\n"; string(out) != want || n != 3 {
		t.Errorf("Strip = %q, %d; want %q, 3", out, n, want)
	}
	out, n = Strip([]byte(src), is, StripOptions{DropDefaultRuntimeName: true})
	if want := "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"; string(out) != want || n != 4 {
		t.Errorf("Strip dropping default = %q, %d; want %q, 4", out, n, want)
	}
}

func TestRenderValues(t *testing.T) {
	got := string(Render(Layout{Version: 3}, []Runtime{{
		Name: "nvidia.x", RuntimeType: "io.containerd.runc.v2",
		Options: map[string]any{"b": []any{1, "two", 3.5}, "a": map[string]any{"k y": false}, "c": `q"\`, "d": float64(2)},
	}}, "\n"))
	want := `[plugins."io.containerd.cri.v1.runtime".containerd.runtimes."nvidia.x"]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes."nvidia.x".options]
  a = { "k y" = false }
  b = [1, "two", 3.5]
  c = "q\"\\"
  d = 2.0
`
	if got != want {
		t.Errorf("Render:\n%s\nwant:\n%s", got, want)
	}
	if err := parseErr([]byte(got)); err != nil {
		t.Errorf("rendered TOML does not parse: %v", err)
	}
}

func TestRebuildRefuses(t *testing.T) {
	nv := []Runtime{{Name: "nvidia", RuntimeType: "io.containerd.runc.v2", BinaryName: "/b"}}
	cases := []struct {
		name, src string
		l         Layout
		rts       []Runtime
		setDef    bool
		present   bool
		want      string
	}{
		{"inline runtimes", "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nruntimes = { nvidia = { runtime_type = \"x\" } }\n", Layout{2}, nv, false, true, "line 2: plugins"},
		{"inline plugin", "plugins = { cri = 1 }\n", Layout{2}, nv, false, false, "line 1"},
		{"array of runtimes tables", "[[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes]]\n", Layout{2}, nv, false, true, "array of tables"},
		{"open value at the end", "x = \"\"\"\nabc\n", Layout{2}, nv, false, true, "not terminated"},
		{"bad version", "", Layout{4}, nv, false, true, "want 1, 2 or 3"},
		{"no runtimes", "", Layout{2}, nil, false, true, "no runtimes"},
		{"default of absent", "", Layout{2}, nv, true, false, "default runtime"},
		{"duplicate names", "", Layout{2}, append(nv, nv...), false, true, "listed twice"},
		{"bad option", "", Layout{2}, []Runtime{{Name: "n", RuntimeType: "t", Options: map[string]any{"x": struct{}{}}}}, false, true, "unsupported"},
		{"binary twice", "", Layout{2}, []Runtime{{Name: "n", RuntimeType: "t", BinaryName: "b", Options: map[string]any{"BinaryName": "c"}}}, false, true, "both"},
	}
	for _, c := range cases {
		_, err := Rebuild([]byte(c.src), c.l, c.rts, c.setDef, c.present)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
	// An open value before the stripped table is fine: the runtimes go
	// where the table was, not after the open value.
	if _, err := Rebuild([]byte("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n[other]\nx = [\n"), Layout{2}, nv, false, true); err != nil {
		t.Errorf("open value after the insertion point: %v", err)
	}
}

// TestContainerdRejectsDuplicatedInput shows why Strip cannot use a TOML
// parser: the real containerd refuses the incident's twice-pasted file
// that the golden case repairs.
func TestContainerdRejectsDuplicatedInput(t *testing.T) {
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("containerd is required: %v", err)
	}
	for _, gc := range loadGolden(t) {
		if !strings.HasSuffix(gc.path, "03-main-appended-twice.txtar") {
			continue
		}
		dir := t.TempDir()
		path := dir + "/config.toml"
		if err := writeFile(path, gc.sections["input"]); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--config", path, "config", "dump").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "duplicated tables") {
			t.Fatalf("containerd accepted the duplicated input (err %v):\n%s", err, out)
		}
		if parses(gc.sections["input"]) {
			t.Fatal("go-toml parsed the duplicated input")
		}
		return
	}
	t.Fatal("golden case 03-main-appended-twice not found")
}

// TestValidateRuntimesCaseCollisions (issue 10, defect 2): an option spelled
// binaryName next to the BinaryName field, or two options that differ only
// in case, are refused: containerd 2.x would decode only one of them.
func TestValidateRuntimesCaseCollisions(t *testing.T) {
	for _, opts := range []map[string]any{
		{"binaryName": "/usr/local/bin/runc"},
		{"BINARYNAME": "/usr/local/bin/runc"},
		{"SystemdCgroup": true, "systemdCgroup": false},
	} {
		rts := []Runtime{{Name: "nvidia", RuntimeType: "io.containerd.runc.v2", BinaryName: "/x/nvidia-container-runtime", Options: opts}}
		if err := ValidateRuntimes(rts); err == nil {
			t.Errorf("options %v accepted", opts)
		}
		if _, err := Rebuild(nil, Layout{Version: 3}, rts, false, true); err == nil {
			t.Errorf("Rebuild with options %v did not fail", opts)
		}
	}
}

func TestSetVersion(t *testing.T) {
	for in, want := range map[string]string{
		"# c\r\nversion = 2 # two\r\n[a]\r\nversion = 2\r\n": "# c\r\nversion = 3 # two\r\n[a]\r\nversion = 2\r\n",
		"[a]\nversion = 2\n": "[a]\nversion = 2\n",
		"x = 1\n":            "x = 1\n",
	} {
		if got := string(SetVersion([]byte(in), 3)); got != want {
			t.Errorf("SetVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
