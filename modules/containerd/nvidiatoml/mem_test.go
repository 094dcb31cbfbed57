package nvidiatoml

import (
	"bytes"
	"runtime"
	"testing"
)

// bigCommentedConfig is a config of about size bytes: an nvidia table
// pasted at the top, then the operator's comments (the 50 MB
// config.toml of comments).
func bigCommentedConfig(size int) []byte {
	var b bytes.Buffer
	b.WriteString("version = 2\n\n")
	b.WriteString("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n  runtime_type = \"io.containerd.runc.v2\"\n\n")
	line := "# operator note: keep this line, it documents something that matters to someone\n"
	for b.Len() < size {
		b.WriteString(line)
	}
	return b.Bytes()
}

// allocatedBy returns the bytes f allocates on the heap.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRebuildMemoryBounded (issue 10, defect 9): rebuilding a large file of
// comments keeps every comment and allocates a small multiple of the file's
// size (the issue saw 1.5 GB RSS for a 50 MB file).
func TestRebuildMemoryBounded(t *testing.T) {
	src := bigCommentedConfig(16 << 20)
	var out []byte
	var err error
	n := allocatedBy(func() { out, err = Rebuild(src, Layout{Version: 2}, incidentRuntimes, false, true) })
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < len(src)-200 {
		t.Fatalf("comments lost: %d bytes in, %d out", len(src), len(out))
	}
	ratio := float64(n) / float64(len(src))
	t.Logf("Rebuild of %d bytes allocated %d bytes (%.2fx)", len(src), n, ratio)
	if ratio > 3 {
		t.Errorf("Rebuild allocated %.2fx the file's size, want at most 3x", ratio)
	}
}

// BenchmarkRebuildLarge reports allocations per byte of a 16 MB file.
func BenchmarkRebuildLarge(b *testing.B) {
	src := bigCommentedConfig(16 << 20)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Rebuild(src, Layout{Version: 2}, incidentRuntimes, false, true); err != nil {
			b.Fatal(err)
		}
	}
}
