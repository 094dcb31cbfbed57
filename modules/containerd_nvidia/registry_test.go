package containerdnvidia

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/lab/labtest"
)

// TestRefusesCandidateCRIWouldNotLoad (issue 10 matrix: kind's config with
// the incident's registry drop-in on 2.x): the tree sets registry mirrors
// and config_path together. `config dump` accepts it, the CRI plugin does
// not load; writing the runtimes and restarting wrote, failed the gates and
// rolled back (the shipped playbook's sysctl write and the restart it
// owes). Check now refuses before any write of the play, naming both keys
// and that the node is already so.
func TestRefusesCandidateCRIWouldNotLoad(t *testing.T) {
	bin := labtest.Containerd(t, labtest.Containerd2)
	dir := t.TempDir()
	tk := toolkitDir(t, dir)
	main := filepath.Join(dir, "config.toml")
	files := map[string]string{
		main: "version = 2\nimports = [\"" + dir + "/conf.d/*.toml\"]\n" +
			"[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"k8s.gcr.io\"]\n  endpoint = [\"https://registry.k8s.io\"]\n",
		filepath.Join(dir, "conf.d", "zz-labhub-registry.toml"): "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := checkAuto(t, main, tk, "present", bin)
	var ve *module.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Msg, "config_path") || !strings.Contains(ve.Msg, "mirrors") || !strings.Contains(ve.Msg, "already") {
		t.Fatalf("Check = %v, want a refusal naming config_path, the mirrors and that the node is already so", err)
	}
}
