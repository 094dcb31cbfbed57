package ctrconf

import (
	"context"
	"path/filepath"
	"testing"

	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
)

// TestProofReusedOnlyForTheSameTree: a dump of a tree this run already
// dumped (the plan's candidate, then the re-check of the tree as applied)
// runs containerd no more; a tree that differs in one file is dumped anew
// and shows the new value.
func TestProofReusedOnlyForTheSameTree(t *testing.T) {
	ctx := context.Background()
	mainPath, confd := incident(t)
	zz := filepath.Join(confd, "zz-labhub-registry.toml")
	// A host whose backups go to the test's own state dir.
	h := &localReader{host: node.NewHost(localconn.New("local"), node.HostOptions{StateDir: filepath.Join(t.TempDir(), "state")})}
	tree := gather(t, h, mainPath)
	// The plan: the candidate without zz.
	cand, err := Dump(ctx, h, tree, Overrides{zz: nil})
	if err != nil || !cand.OK {
		t.Fatalf("candidate: %v %+v", err, cand)
	}
	ran, _ := h.host.StageCounts()
	// Apply: the move, through the same Host (its cache learns the move).
	if _, err := h.host.Apply(ctx, []transport.Op{{Kind: transport.OpMove, From: zz, Path: zz + ".off"}}); err != nil {
		t.Fatal(err)
	}
	applied := gather(t, h, mainPath)
	if len(applied.Files) != 2 {
		t.Fatalf("after the move the tree has %d files", len(applied.Files))
	}
	again, err := Dump(ctx, h, applied, nil)
	if err != nil || !again.OK {
		t.Fatalf("re-check: %v %+v", err, again)
	}
	if r, _ := h.host.StageCounts(); r != ran {
		t.Fatalf("the re-check of the applied tree ran containerd %d more times, want 0", r-ran)
	}
	if string(again.Raw) != string(cand.Raw) {
		t.Fatalf("the reused proof differs from the candidate's dump")
	}
	// One byte changes in a file of the tree: a new dump, the new value.
	nv := filepath.Join(confd, "99-nvidia.toml")
	content := append([]byte(nil), applied.File(nv).Content...)
	content = []byte(string(content) + "\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.extra]\n  runtime_type = \"io.containerd.runc.v2\"\n")
	if _, err := h.host.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: nv, Content: content}}); err != nil {
		t.Fatal(err)
	}
	changed := gather(t, h, mainPath)
	eff, err := Dump(ctx, h, changed, nil)
	if err != nil || !eff.OK {
		t.Fatalf("changed tree: %v %+v", err, eff)
	}
	if r, _ := h.host.StageCounts(); r != ran+1 {
		t.Fatalf("the changed tree ran containerd %d times, want 1", r-ran)
	}
	if _, ok := eff.Get(`plugins."io.containerd.grpc.v1.cri".containerd.runtimes.extra.runtime_type`); !ok {
		t.Fatalf("the changed file's runtime is not in its dump: a proof of another tree was reused")
	}
}

// TestAnalyzeStagesWhatItNeeds: a tree where every written value is in
// effect costs one dump; the incident's tree (zz hides what the others
// write) costs the defaults and the prefixes, and the ablation of zz only,
// which is the prefix without it: 4 dumps, not the 6 of a full Explain.
func TestAnalyzeStagesWhatItNeeds(t *testing.T) {
	ctx := context.Background()
	mainPath, confd := incident(t)
	zz := filepath.Join(confd, "zz-labhub-registry.toml")
	h := newLocal(t)
	tree := gather(t, h, mainPath)
	an, err := Analyze(ctx, h, tree)
	if err != nil || !an.Base.OK {
		t.Fatalf("Analyze: %v", err)
	}
	if r, _ := h.host.StageCounts(); r != 4 {
		t.Errorf("Analyze of the incident tree ran containerd %d times, want 4", r)
	}
	if len(an.Shadows) != 1 || an.Shadows[0].File != zz {
		t.Errorf("shadows = %+v, want zz only", an.Shadows)
	}
	full, err := ExplainTree(ctx, h, tree)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Shadows) != len(an.Shadows) || len(full.Lost) != len(an.Lost) {
		t.Errorf("Analyze found %d shadows and %d lost keys, Explain %d and %d", len(an.Shadows), len(an.Lost), len(full.Shadows), len(full.Lost))
	}
	cand, err := CandidateTree(tree, Overrides{zz: nil})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := h.host.StageCounts()
	an2, err := Analyze(ctx, h, cand)
	if err != nil || !an2.Base.OK || len(an2.Lost) != 0 {
		t.Fatalf("Analyze of the candidate: %v, lost %+v", err, an2.Lost)
	}
	if r, _ := h.host.StageCounts(); r != before {
		t.Errorf("Analyze of the candidate ran containerd %d times; its whole tree was dumped already", r-before)
	}
}

// TestDumpParsedOnce: every task that dumps the same tree on a host gets
// the one Effective parsed from the one staged result; a tree that differs
// is its own.
func TestDumpParsedOnce(t *testing.T) {
	ctx := context.Background()
	mainPath, confd := incident(t)
	h := &localReader{host: node.NewHost(localconn.New("local"), node.HostOptions{StateDir: filepath.Join(t.TempDir(), "state")})}
	a, err := Dump(ctx, h, gather(t, h, mainPath), nil)
	if err != nil || !a.OK {
		t.Fatalf("dump: %v %+v", err, a)
	}
	b, err := Dump(ctx, h, gather(t, h, mainPath), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("the same tree's dump was parsed again")
	}
	c, err := Dump(ctx, h, gather(t, h, mainPath), Overrides{filepath.Join(confd, "zz-labhub-registry.toml"): nil})
	if err != nil {
		t.Fatal(err)
	}
	// Without the registry drop-in the nvidia runtimes are back.
	key := `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.runtime_type`
	_, inA := a.Get(key)
	_, inC := c.Get(key)
	if c == a || inA || !inC {
		t.Errorf("another tree's dump: shared %v, nvidia in the incident %v, without the drop-in %v", c == a, inA, inC)
	}
}
