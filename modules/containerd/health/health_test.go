package health

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

func TestPluginErrorAndHint(t *testing.T) {
	// As `ctr plugins ls -d id==cri` prints a failed CRI plugin (1.6).
	out := `Type:          io.containerd.grpc.v1
ID:            cri
Platforms:     linux/amd64
Error:
               Code:        Unknown
               Message:     failed to create CRI service: failed to create cni conf monitor for default: failed to create fsnotify watcher: too many open files
`
	got := pluginError(out + out)
	want := "failed to create CRI service: failed to create cni conf monitor for default: failed to create fsnotify watcher: too many open files"
	if got != want {
		t.Errorf("pluginError = %q, want %q (once)", got, want)
	}
	if h := hintFor(got); h != TooManyOpenFilesHint {
		t.Errorf("hint for %q = %q", got, h)
	}
	if h := hintFor("invalid plugin config"); h != "" {
		t.Errorf("hint for another error = %q", h)
	}
	if pluginError("Type: io.containerd.grpc.v1\nID: cri\n") != "" {
		t.Error("a healthy plugin has no error text")
	}
}

// TestRuntimesFromRealDumps parses `config dump` of both generations' real
// binaries: the runtimes live under different plugins.
func TestRuntimesFromRealDumps(t *testing.T) {
	for _, c := range []struct {
		gen     labtest.Generation
		plugin  string
		version int
	}{
		{labtest.Containerd16, "io.containerd.grpc.v1.cri", 2},
		{labtest.Containerd2, "io.containerd.cri.v1.runtime", 3},
	} {
		t.Run(string(c.gen), func(t *testing.T) {
			bin := labtest.Containerd(t, c.gen)
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config.toml")
			body := "version = " + strconv.Itoa(c.version) + "\nroot = \"" + dir + "/root\"\nstate = \"" + dir + "/state\"\n" +
				"[plugins.\"" + c.plugin + "\".containerd.runtimes.nvidia]\n  runtime_type = \"io.containerd.runc.v2\"\n" +
				"[plugins.\"" + c.plugin + "\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n"
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			dump, err := exec.Command(bin, "--config", cfg, "config", "dump").Output()
			if err != nil {
				t.Fatalf("config dump: %v", err)
			}
			got, err := runtimes(dump)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"nvidia", "runc"}, got); diff != "" {
				t.Errorf("runtimes (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := runtimes([]byte("not toml [")); err == nil || !strings.Contains(err.Error(), "parse config dump") {
		t.Errorf("garbage dump: err = %v", err)
	}
}

// TestBinaryNamesAsDecoded (issue 10, defect 2): the gate reads BinaryName
// as the dump's containerd generation decodes it, and fails a runtime whose
// options spell it twice with different values, the shape that made 2.x run
// plain runc while every check passed.
func TestBinaryNamesAsDecoded(t *testing.T) {
	for _, c := range []struct {
		version int
		plugin  string
		want    string
	}{
		{2, "io.containerd.grpc.v1.cri", "/nv/nvidia-container-runtime"},
		{3, "io.containerd.cri.v1.runtime", "/usr/local/bin/runc"},
	} {
		dump := "version = " + strconv.Itoa(c.version) + "\n[plugins.\"" + c.plugin + "\".containerd.runtimes.nvidia.options]\n" +
			"  BinaryName = \"/nv/nvidia-container-runtime\"\n  binaryName = \"/usr/local/bin/runc\"\n"
		got, problems, err := binaryNames([]byte(dump), []string{"nvidia"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got["nvidia"] != c.want || len(problems) != 1 || !strings.Contains(problems[0], "disagree") {
			t.Errorf("version %d: got %v, problems %q; want %s and one problem", c.version, got, problems, c.want)
		}
		clean := "version = " + strconv.Itoa(c.version) + "\n[plugins.\"" + c.plugin + "\".containerd.runtimes.nvidia.options]\n  BinaryName = \"/nv/x\"\n"
		if _, problems, err := binaryNames([]byte(clean), []string{"nvidia"}, map[string]string{"nvidia": "/nv/y"}); err != nil || len(problems) != 1 {
			t.Errorf("version %d: want one problem for a wrong BinaryName, got %q %v", c.version, problems, err)
		}
		if _, problems, err := binaryNames([]byte(clean), []string{"nvidia"}, map[string]string{"nvidia": "/nv/x"}); err != nil || len(problems) != 0 {
			t.Errorf("version %d: clean dump: problems %q %v", c.version, problems, err)
		}
	}
}

// TestDumpFactsFromRealDumps: the sandbox image and the default runtime as
// each generation's own dump prints them (2.x keeps the image in the images
// plugin's pinned_images, which its CRI status does not report).
func TestDumpFactsFromRealDumps(t *testing.T) {
	for _, c := range []struct {
		gen     labtest.Generation
		version int
		image   string
	}{
		{labtest.Containerd16, 2, "registry.k8s.io/pause:3.6"},
		{labtest.Containerd17, 2, "registry.k8s.io/pause:3.8"},
		{labtest.Containerd2, 3, "registry.k8s.io/pause:3.10"},
	} {
		t.Run(string(c.gen), func(t *testing.T) {
			bin := labtest.Containerd(t, c.gen)
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config.toml")
			body := "version = " + strconv.Itoa(c.version) + "\nroot = \"" + dir + "/root\"\nstate = \"" + dir + "/state\"\n"
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			dump, err := exec.Command(bin, "--config", cfg, "config", "dump").Output()
			if err != nil {
				t.Fatalf("config dump: %v", err)
			}
			img, def := DumpFacts(dump)
			if !strings.HasPrefix(img, c.image) || def != "runc" {
				t.Errorf("sandbox image %q, default runtime %q; want %s*, runc", img, def, c.image)
			}
		})
	}
}
