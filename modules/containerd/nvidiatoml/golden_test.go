package nvidiatoml

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"
)

var update = flag.Bool("update", false, "rewrite the want sections of testdata/golden/*.txtar from the current output")

// incidentRuntimes are the three runtimes the GPU Operator wrote in the
// incident.
var incidentRuntimes = []Runtime{
	{Name: "nvidia", RuntimeType: "io.containerd.runc.v2", BinaryName: "/usr/local/nvidia/toolkit/nvidia-container-runtime",
		Options: map[string]any{"SystemdCgroup": true}},
	{Name: "nvidia-cdi", RuntimeType: "io.containerd.runc.v2", BinaryName: "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi",
		Options: map[string]any{"SystemdCgroup": true}},
	{Name: "nvidia-legacy", RuntimeType: "io.containerd.runc.v2", BinaryName: "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy",
		Options: map[string]any{"SystemdCgroup": true}},
}

// goldenCase is one testdata/golden/*.txtar file. Its comment holds
// `key: value` settings:
//
//	runtimes: nvidia,nvidia-cdi   which of incidentRuntimes (default nvidia)
//	set-default: true             Rebuild with setDefault
//	version: 3                    layout version (default: DetectVersion, 2 if absent)
//	crlf: true                    sections are stored with LF; the test uses CRLF
//	no-final-newline: input,want  sections whose final newline the test removes
//	containerd: nvidia,runc       load want into the real containerd and expect these runtimes
//	containerd-default: nvidia    ...and this default_runtime_name
type goldenCase struct {
	path     string
	arch     *archive
	opts     map[string]string
	rts      []Runtime
	layout   Layout
	setDef   bool
	sections map[string][]byte // as the test uses them (CRLF applied etc.)
}

func loadGolden(t testing.TB) []*goldenCase {
	t.Helper()
	paths, err := filepath.Glob("testdata/golden/*.txtar")
	if err != nil {
		t.Fatalf("glob: %v", err)
	}
	if len(paths) < 20 {
		t.Fatalf("found %d golden files, want at least 20", len(paths))
	}
	var cases []*goldenCase
	for _, p := range paths {
		a, err := parseArchiveFile(p)
		if err != nil {
			t.Fatalf("parse %s: %v", p, err)
		}
		gc := &goldenCase{path: p, arch: a, opts: map[string]string{}, sections: map[string][]byte{}}
		sc := bufio.NewScanner(bytes.NewReader(a.comment))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				if strings.TrimSpace(sc.Text()) != "" && !strings.HasPrefix(sc.Text(), "#") {
					t.Fatalf("%s: comment line %q is not key: value", p, sc.Text())
				}
				continue
			}
			gc.opts[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		for _, f := range a.files {
			gc.sections[f.name] = gc.toTest(f.name, f.data)
		}
		if _, ok := gc.sections["input"]; !ok {
			t.Fatalf("%s: no input section", p)
		}
		names := []string{"nvidia"}
		if v := gc.opts["runtimes"]; v != "" {
			names = strings.Split(v, ",")
		}
		for _, n := range names {
			i := slices.IndexFunc(incidentRuntimes, func(r Runtime) bool { return r.Name == n })
			if i < 0 {
				t.Fatalf("%s: unknown runtime %q", p, n)
			}
			gc.rts = append(gc.rts, incidentRuntimes[i])
		}
		gc.layout.Version = DetectVersion(gc.sections["input"])
		if gc.layout.Version == 0 {
			gc.layout.Version = 2
		}
		if v := gc.opts["version"]; v != "" {
			if _, err := fmt.Sscan(v, &gc.layout.Version); err != nil {
				t.Fatalf("%s: version %q: %v", p, v, err)
			}
		}
		gc.setDef = gc.opts["set-default"] == "true"
		cases = append(cases, gc)
	}
	return cases
}

func (gc *goldenCase) trims(section string) bool {
	return slices.Contains(strings.Split(gc.opts["no-final-newline"], ","), section)
}

// toTest turns a stored section into the bytes the test uses.
func (gc *goldenCase) toTest(section string, b []byte) []byte {
	b = slices.Clone(b)
	if gc.opts["crlf"] == "true" {
		b = bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
	}
	if gc.trims(section) {
		b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	}
	return b
}

// toStored is the inverse of toTest, for -update.
func (gc *goldenCase) toStored(t *testing.T, section string, b []byte) []byte {
	if gc.trims(section) == bytes.HasSuffix(b, []byte("\n")) && len(b) > 0 {
		t.Errorf("%s: section %s: final newline does not match no-final-newline setting", gc.path, section)
	}
	if gc.opts["crlf"] == "true" {
		if bytes.Count(b, []byte("\r\n")) != bytes.Count(b, []byte("\n")) {
			t.Errorf("%s: section %s: mixed line endings in CRLF case", gc.path, section)
		}
		b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	}
	return b
}

func (gc *goldenCase) want() ([]byte, error) {
	return Rebuild(gc.sections["input"], gc.layout, gc.rts, gc.setDef, true)
}

func (gc *goldenCase) wantAbsent() ([]byte, error) {
	return Rebuild(gc.sections["input"], gc.layout, gc.rts, false, false)
}

func TestGolden(t *testing.T) {
	for _, gc := range loadGolden(t) {
		t.Run(strings.TrimSuffix(filepath.Base(gc.path), ".txtar"), func(t *testing.T) {
			got := map[string][]byte{}
			var err error
			if got["want"], err = gc.want(); err != nil {
				t.Fatalf("Rebuild present: %v", err)
			}
			if got["want-absent"], err = gc.wantAbsent(); err != nil {
				t.Fatalf("Rebuild absent: %v", err)
			}
			if *update {
				gc.arch.files = []archiveFile{{name: "input", data: gc.toStored(t, "input", gc.sections["input"])}}
				for _, s := range []string{"want", "want-absent"} {
					gc.arch.files = append(gc.arch.files, archiveFile{name: s, data: gc.toStored(t, s, got[s])})
				}
				if err := os.WriteFile(gc.path, gc.arch.format(), 0o644); err != nil {
					t.Fatalf("update: %v", err)
				}
				return
			}
			for _, s := range []string{"want", "want-absent"} {
				want, ok := gc.sections[s]
				if !ok {
					t.Fatalf("no %s section; run with -update and review", s)
				}
				if diff := cmp.Diff(string(want), string(got[s])); diff != "" {
					t.Errorf("%s mismatch (-want +got):\n%s", s, diff)
				}
			}
			checkProperties(t, gc.sections["input"], gc.layout, gc.rts, gc.setDef, false)
		})
	}
}

// checkProperties asserts what must hold for every input: both Rebuilds
// are fixed points, converge from each other's output, strip every nvidia
// header, keep every other statement in order, and parse whenever the
// stripped input parses. With refusals, Rebuild may refuse the input (a
// file it cannot edit safely), but never its own output.
func checkProperties(t *testing.T, in []byte, l Layout, rts []Runtime, setDef, refusals bool) {
	t.Helper()
	present, err := Rebuild(in, l, rts, setDef, true)
	if err != nil {
		if refusals {
			return
		}
		t.Fatalf("Rebuild present: %v", err)
	}
	absent, err := Rebuild(in, l, rts, false, false)
	if err != nil {
		t.Fatalf("Rebuild absent refused what present accepted: %v", err)
	}
	for name, c := range map[string]struct {
		from    []byte
		present bool
	}{
		"present(present)": {present, true},
		"absent(absent)":   {absent, false},
	} {
		again, err := Rebuild(c.from, l, rts, setDef && c.present, c.present)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(string(c.from), string(again)); diff != "" {
			t.Errorf("%s is not a fixed point (-want +got):\n%s", name, diff)
		}
	}
	// Switching state back and forth converges too: each direction's
	// output is a fixed point of itself. (present(absent) puts the runtimes
	// at the end, present(input) where they were, so they can differ.)
	for name, c := range map[string]struct {
		from    []byte
		present bool
	}{
		"present(absent)": {absent, true},
		"absent(present)": {present, false},
	} {
		once, err := Rebuild(c.from, l, rts, setDef && c.present, c.present)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		twice, err := Rebuild(once, l, rts, setDef && c.present, c.present)
		if err != nil {
			t.Fatalf("%s again: %v", name, err)
		}
		if diff := cmp.Diff(string(once), string(twice)); diff != "" {
			t.Errorf("%s is not a fixed point (-want +got):\n%s", name, diff)
		}
	}
	isNv := namesRule(rts)
	if n := countNvidiaHeaders(absent, isNv); n != 0 {
		t.Errorf("absent output still has %d nvidia headers:\n%s", n, absent)
	}
	if n, want := countNvidiaHeaders(present, isNv), wantHeaders(rts); n != want {
		t.Errorf("present output has %d nvidia headers, want %d:\n%s", n, want, present)
	}
	keptLines := keptStatementLines(in, isNv)
	for name, out := range map[string][]byte{"present": present, "absent": absent} {
		if missing := notSubsequence(keptLines, splitLines(out)); missing != "" {
			t.Errorf("%s output lost or reordered non-nvidia line %q", name, missing)
		}
	}
	if stripped, _ := Strip(in, isNv, StripOptions{}); parses(stripped) {
		for name, out := range map[string][]byte{"present": present, "absent": absent} {
			if err := parseErr(out); err != nil {
				t.Errorf("%s output does not parse although the input without nvidia parts does: %v\n%s", name, err, out)
			}
		}
	}
}

func namesRule(rts []Runtime) func(string) bool {
	names := make([]string, len(rts))
	for i, r := range rts {
		names[i] = r.Name
	}
	return IsManaged(names)
}

func wantHeaders(rts []Runtime) int {
	n := 0
	for _, r := range rts {
		n++
		if r.BinaryName != "" || len(r.Options) > 0 {
			n++
		}
	}
	return n
}

func countNvidiaHeaders(src []byte, isNv func(string) bool) int {
	n := 0
	for _, s := range parse(src) {
		if s.kind == kHeader || s.kind == kArrayHeader {
			if _, name, ok := runtimeOf(s.path); ok && isNv(name) {
				n++
			}
		}
	}
	return n
}

// keptStatementLines returns the lines of in that Strip must keep, by the
// package's own classifier, with default_runtime_name lines left out since
// Rebuild may rewrite them.
func keptStatementLines(in []byte, isNv func(string) bool) []string {
	c := classify(in, rules{isNvidia: isNv})
	var lines []string
	for i, s := range c.stmts {
		if c.drop[i] {
			continue
		}
		if s.kind == kKeyVal {
			if _, ok := defaultOf(c.abs(i)); ok {
				continue
			}
		}
		lines = append(lines, splitLines(in[s.start:s.end])...)
	}
	return lines
}

// splitLines splits into lines without their line endings ("\n" or
// "\r\n"); an unterminated last line is kept whole.
func splitLines(b []byte) []string {
	var lines []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return append(lines, string(b))
		}
		lines = append(lines, string(bytes.TrimSuffix(b[:i], []byte("\r"))))
		b = b[i+1:]
	}
	return lines
}

// notSubsequence returns the first line of sub that cannot be matched in
// order in full, or "" if sub is a subsequence.
func notSubsequence(sub, full []string) string {
	j := 0
	for _, l := range sub {
		for j < len(full) && full[j] != l {
			j++
		}
		if j == len(full) {
			return l
		}
		j++
	}
	return ""
}

func parseErr(b []byte) error {
	var m map[string]any
	return toml.Unmarshal(b, &m)
}

func parses(b []byte) bool { return parseErr(b) == nil }
