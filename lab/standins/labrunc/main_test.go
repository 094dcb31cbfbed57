package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// bundle writes a config.json with cgroupsPath p and returns its folder.
func bundle(t *testing.T, p string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(map[string]any{"linux": map[string]any{"cgroupsPath": p}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func cgroupsPath(t *testing.T, dir string) string {
	t.Helper()
	p, err := specCgroupsPath(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Under --systemd-cgroup the slice form (what containerd makes of a
// kubelet's .slice cgroup parent) runs on cgroupfs below the node's root;
// a cgroupfs path goes to runc untouched, which refuses it as on a node
// with systemd. Without the flag a cgroupfs path is put below the root.
func TestAdaptCgroupsPath(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		systemd    bool
		want       string // cgroupsPath after adapt; "" = left as it was for runc
	}{
		{"systemd slice", "kubepods-besteffort-podx.slice:cri-containerd:abc", true, "/lab/n1/cri-containerd-abc"},
		{"systemd unset", "", true, "/lab/n1/abc"},
		{"systemd cgroupfs path refused by runc", "/k8s.io/abc", true, ""},
		{"cgroupfs kubelet path", "/kubepods/besteffort/podx/abc", false, "/lab/n1/kubepods/besteffort/podx/abc"},
		{"cgroupfs default", "/k8s.io/abc", false, "/lab/n1/k8s.io/abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundle(t, tc.path)
			args := []string{"--root", "/run/runc", "create", "--bundle", dir, "abc"}
			if tc.systemd {
				args = append([]string{"--systemd-cgroup"}, args...)
			}
			out, changes, err := adapt(args, "/lab/n1")
			if err != nil {
				t.Fatal(err)
			}
			got := cgroupsPath(t, dir)
			if tc.want == "" {
				if !reflect.DeepEqual(out, args) || got != tc.path {
					t.Fatalf("want the call left to runc as it was, got args %q, cgroupsPath %q", out, got)
				}
				if len(changes) != 1 || !strings.Contains(changes[0], "left to runc") {
					t.Fatalf("changes %q do not say the call was left to runc", changes)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("cgroupsPath %q, want %q (changes %q)", got, tc.want, changes)
			}
			for _, a := range out {
				if a == "--systemd-cgroup" {
					t.Fatalf("--systemd-cgroup kept in %q", out)
				}
			}
		})
	}
}
