package app

import (
	"testing"

	"nodeconverge/engine/inventory"
	"nodeconverge/modules/containerd/ctrconf"
)

// TestDeclaredFromRegistry: explain --playbook finds the tasks that declare
// values through the module registry (ctrconf.Declarer), per host their
// play targets, and places what they declare; tasks of other modules
// declare nothing.
func TestDeclaredFromRegistry(t *testing.T) {
	write := testWriter(t)
	invPath := write("inv.yaml", "all:\n  children:\n    gpu:\n      hosts:\n        g1: {}\n    cpu:\n      hosts:\n        c1: {}\n")
	pb := write("pb.yaml", `- hosts: gpu
  tasks:
    - containerd_settings:
        settings:
          cri.sandbox_image: registry.k8s.io/pause:3.9
    - command:
        argv: ["true"]
`)
	inv, err := inventory.Load(invPath)
	if err != nil {
		t.Fatal(err)
	}
	declared, err := declaredSettings(inv, pb)
	if err != nil {
		t.Fatal(err)
	}
	if len(declared["c1"]) != 0 || len(declared["g1"]) != 1 {
		t.Fatalf("declarations g1 %d, c1 %d; want 1 and 0", len(declared["g1"]), len(declared["c1"]))
	}
	ex := &ctrconf.Explanation{BinVersion: "1.6.20", Keys: []ctrconf.KeyOrigin{{Key: `plugins."io.containerd.grpc.v1.cri".sandbox_image`, Value: `"registry.k8s.io/pause:3.9"`, File: "/etc/containerd/config.toml"}}}
	got := declared["g1"][0].Place(ex)
	if len(got) != 1 || !got[0].InEffect || got[0].DecidedBy != "/etc/containerd/config.toml" {
		t.Errorf("placed %+v, want the sandbox image in effect, decided by config.toml", got)
	}
}
