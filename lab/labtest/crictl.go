package labtest

import (
	"os"
	"testing"
)

// crictl is the real crictl (sigs.k8s.io/cri-tools, the version lab/crictl pins).
var crictl = &goTool{env: "NODECONVERGE_CRICTL", name: "crictl"}

// Crictl returns the path of the real crictl, failing the test when it cannot be had. A test that
// wants a node to have crictl installs it there with InstallCrictl; nodes have none by default, as
// many real nodes do not.
func Crictl(t testing.TB) string {
	t.Helper()
	return crictl.path(t)
}

// InstallCrictl puts crictl on the node's PATH (/usr/local/sbin/crictl, a link to the host's
// binary: the node shares the host's files outside its own bind mounts).
func (l *Lab) InstallCrictl(t testing.TB, node string) {
	t.Helper()
	bin := Crictl(t)
	dst := l.NodePath(node, "/usr/local/sbin/crictl")
	if err := os.Symlink(bin, dst); err != nil && !os.IsExist(err) {
		t.Fatalf("labtest: install crictl on %s: %v", node, err)
	}
}
