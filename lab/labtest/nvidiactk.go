package labtest

import "testing"

// nvidiaCTK is NVIDIA's real nvidia-ctk (the NVIDIA Container Toolkit CLI, the version
// lab/nvidia-ctk pins).
var nvidiaCTK = &goTool{env: "NODECONVERGE_NVIDIA_CTK", name: "nvidia-ctk"}

// NvidiaCTK returns the path of NVIDIA's real nvidia-ctk, failing the test when it cannot be had.
// Tests run it inside a node (Lab.Exec) to see what `nvidia-ctk runtime configure` does to that
// node's containerd config; the node shares the host's binaries, so the host path works there.
func NvidiaCTK(t testing.TB) string {
	t.Helper()
	return nvidiaCTK.path(t)
}
