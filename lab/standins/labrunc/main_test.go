package main

import (
	"encoding/json"
	"os"
	"os/exec"
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

// TestMain runs the stand-in itself when a test re-executes this binary
// with labruncMain set, so the tests below drive the real main().
func TestMain(m *testing.M) {
	if os.Getenv("labruncMain") != "" {
		os.Unsetenv("labruncMain")
		main()
		return
	}
	os.Exit(m.Run())
}

// standin runs main() with args and env; it returns its output and error.
func standin(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "labruncMain=1"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The stand-in hands a call to the runc -lab-real-runc names, with the
// call's arguments, marked as forwarded; a call that reaches it marked
// (its real runc is the stand-in again) is refused, not looped.
func TestForwardsToTheRealRunc(t *testing.T) {
	dir := t.TempDir()
	real, got := filepath.Join(dir, "runc"), filepath.Join(dir, "called")
	script := "#!/bin/sh\nprintf '%s|%s|%s\\n' \"$0\" \"$*\" \"$" + envDepth + "\" >'" + got + "'\n"
	if err := os.WriteFile(real, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := standin(t, nil, "-lab-real-runc="+real, "--", "--root", "/run/runc", "state", "abc"); err != nil {
		t.Fatalf("stand-in: %v\n%s", err, out)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("the real runc was not run: %v", err)
	}
	if want := real + "|--root /run/runc state abc|1\n"; string(b) != want {
		t.Errorf("the real runc got %q, want %q", b, want)
	}

	if err := os.Remove(got); err != nil {
		t.Fatal(err)
	}
	out, err := standin(t, []string{envDepth + "=1"}, "-lab-real-runc="+real, "--", "state", "abc")
	if err == nil || !strings.Contains(out, "runs this stand-in again") {
		t.Fatalf("a forwarded call: want a refusal naming the loop, got %v\n%s", err, out)
	}
	if _, err := os.Stat(got); !os.IsNotExist(err) {
		t.Errorf("a forwarded call still ran the real runc (%v)", err)
	}
}
