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
