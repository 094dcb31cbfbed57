// Command lab-runc is the lab's runc STAND-IN: a thin wrapper that adapts
// what containerd asks of runc to what this machine can do, then execs the
// real runc (Debian's /usr/sbin/runc, reached at the path -lab-real-runc
// names). lab.sh installs a two-line script as /usr/local/sbin/runc in
// every node (first on the daemon's PATH, so the shim's plain `runc` and
// the nvidia-container-runtime stand-ins' `exec runc` both land here) that
// runs this program with the node's settings.
//
// The real runc is named apart from /usr/sbin/runc because a node may have
// the stand-in there too: a config whose runtime says BinaryName =
// "/usr/sbin/runc" gets the stand-in at that path (e2e's lab-links), and
// forwarding to /usr/sbin/runc would then run the stand-in again. lab.sh
// bind-mounts Debian's runc, in the node's own mount namespace, at a
// lab-private path in the node's directory and passes that path. A call
// that reaches the stand-in from the stand-in (envDepth set) is refused
// rather than looping.
//
// Two things stand in the way of real sandboxes on a lab node, and each is
// changed here, nothing else:
//
//   - No systemd. The configs say SystemdCgroup = true, so the shim passes
//     --systemd-cgroup and containerd writes a "slice:prefix:name"
//     cgroupsPath; with no systemd to talk to, runc would fail. The flag is
//     dropped and the path becomes a cgroupfs path under the node's own
//     subtree (-lab-cgroup), so `lab.sh down` can find and end anything a
//     node's containers left running. A create whose cgroupsPath is not
//     in the slice form goes to runc untouched, --systemd-cgroup kept, so
//     runc refuses it as it does on a node with systemd ("expected
//     cgroupsPath to be of format slice:prefix:name"): what a real node
//     refuses the lab must not run.
//   - No CAP_SYS_RESOURCE. CRI asks for oom_score_adj -998 for a sandbox;
//     lowering a score needs that capability, which these machines lack, so
//     a score below this process's own is raised to it.
//
// Every call is appended to -lab-log (one line: the arguments and what was
// changed), so a test can see that a handler really ran a container.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultRealRunc is the runc this stand-in hands every call to when
// -lab-real-runc does not name another path.
const defaultRealRunc = "/usr/sbin/runc"

// envDepth marks a call the stand-in hands on: the real runc never runs
// the stand-in, so a stand-in that finds it set was reached from itself.
const envDepth = "NODECONVERGE_LAB_RUNC_FORWARDED"

// valueFlags are runc's global flags that take a value.
var valueFlags = map[string]bool{"--log": true, "--log-format": true, "--root": true, "--criu": true, "--rootless": true}

func main() {
	args := os.Args[1:]
	cgroupRoot, logFile, realRunc := "/nodeconverge-lab", "", defaultRealRunc
	// The wrapper's own flags come first, ended by "--".
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			args = args[1:]
			break
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(k, "-lab-") {
			break
		}
		switch k {
		case "-lab-cgroup":
			cgroupRoot = v
		case "-lab-log":
			logFile = v
		case "-lab-real-runc":
			realRunc = v
		}
		args = args[1:]
	}
	if os.Getenv(envDepth) != "" {
		err := fmt.Errorf("the real runc %s runs this stand-in again (it is a link to the stand-in, not runc): give the stand-in Debian's runc with -lab-real-runc", realRunc)
		note(logFile, args, nil, err)
		fmt.Fprintf(os.Stderr, "lab-runc (runc stand-in): %v\n", err)
		os.Exit(1)
	}
	out, changes, err := adapt(args, cgroupRoot)
	note(logFile, args, changes, err)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab-runc (runc stand-in): %v\n", err)
		os.Exit(1)
	}
	env := append(os.Environ(), envDepth+"=1")
	if err := syscall.Exec(realRunc, append([]string{"runc"}, out...), env); err != nil {
		fmt.Fprintf(os.Stderr, "lab-runc (runc stand-in): exec %s: %v\n", realRunc, err)
		os.Exit(1)
	}
}

// adapt returns runc's arguments without --systemd-cgroup and, for create
// and run, edits the bundle's config.json; changes says what it did.
func adapt(args []string, cgroupRoot string) ([]string, []string, error) {
	var out, changes []string
	sub, systemd := -1, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--systemd-cgroup" {
			systemd = true
			changes = append(changes, "dropped --systemd-cgroup")
			continue
		}
		out = append(out, a)
		if !strings.HasPrefix(a, "-") {
			sub = len(out) - 1
			out = append(out, args[i+1:]...)
			break
		}
		if valueFlags[a] && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	if sub < 0 || (out[sub] != "create" && out[sub] != "run") {
		return out, changes, nil
	}
	bundle, id := ".", ""
	rest := out[sub+1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--bundle" || a == "-b":
			if i+1 < len(rest) {
				bundle = rest[i+1]
				i++
			}
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		case a == "--console-socket" || a == "--pid-file" || a == "--preserve-fds":
			i++
		case !strings.HasPrefix(a, "-"):
			id = a
		}
	}
	spec := filepath.Join(bundle, "config.json")
	if systemd {
		p, err := specCgroupsPath(spec)
		if err != nil {
			return nil, nil, err
		}
		if p != "" && !isSlicePath(p) {
			return args, []string{fmt.Sprintf("cgroupsPath %q is not slice:prefix:name under --systemd-cgroup: left to runc, as on a node with systemd", p)}, nil
		}
	}
	c, err := editSpec(spec, cgroupRoot, id)
	return out, append(changes, c...), err
}

// isSlicePath says whether p has systemd's "slice:prefix:name" form.
func isSlicePath(p string) bool {
	return len(strings.Split(p, ":")) == 3
}

// specCgroupsPath is the bundle spec's linux.cgroupsPath ("" if unset).
func specCgroupsPath(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	var spec struct {
		Linux struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return "", fmt.Errorf("parse %s: %w", path, err)
	}
	return spec.Linux.CgroupsPath, nil
}

// editSpec rewrites the bundle's cgroupsPath and oomScoreAdj (see the
// package comment) and returns what it changed.
func editSpec(path, cgroupRoot, id string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	var changes []string
	linux, _ := spec["linux"].(map[string]any)
	if linux == nil {
		linux = map[string]any{}
		spec["linux"] = linux
	}
	old, _ := linux["cgroupsPath"].(string)
	cg := cgroupfsPath(cgroupRoot, old, id)
	linux["cgroupsPath"] = cg
	changes = append(changes, fmt.Sprintf("cgroupsPath %q -> %q", old, cg))
	if proc, _ := spec["process"].(map[string]any); proc != nil {
		if adj, ok := proc["oomScoreAdj"].(float64); ok {
			own := ownOOMScoreAdj()
			if int(adj) < own {
				proc["oomScoreAdj"] = own
				changes = append(changes, fmt.Sprintf("oomScoreAdj %d -> %d (no CAP_SYS_RESOURCE)", int(adj), own))
			}
		}
	}
	nb, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".lab-runc"
	if err := os.WriteFile(tmp, nb, 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("rename %s: %w", tmp, err)
	}
	return changes, nil
}

// cgroupfsPath maps containerd's cgroupsPath to one under root: systemd's
// "slice:prefix:name" becomes root/prefix-name, a cgroupfs path is put
// below root, and none becomes root/ID.
func cgroupfsPath(root, p, id string) string {
	if parts := strings.Split(p, ":"); isSlicePath(p) {
		name := parts[2]
		if parts[1] != "" {
			name = parts[1] + "-" + name
		}
		return filepath.Join(root, name)
	}
	if p == "" {
		if id == "" {
			id = strconv.Itoa(os.Getpid())
		}
		return filepath.Join(root, id)
	}
	return filepath.Join(root, p)
}

func ownOOMScoreAdj() int {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}

// note appends one line about this call to the log; a log that cannot be
// written is not a reason to fail the container.
func note(logFile string, args, changes []string, err error) {
	if logFile == "" {
		return
	}
	f, ferr := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if ferr != nil {
		return
	}
	defer f.Close()
	line := fmt.Sprintf("%s runc %s", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(args, " "))
	if len(changes) > 0 {
		line += " [" + strings.Join(changes, "; ") + "]"
	}
	if err != nil {
		line += " ERROR: " + err.Error()
	}
	fmt.Fprintln(f, line)
}
