package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
)

// shells are the shells every script test runs under: dash (the node's
// /bin/sh on Debian, which reads its script ahead) and bash (which does not).
var shells = []string{"sh", "bash"}

func newTestHost(t *testing.T, shell string, opts HostOptions) *Host {
	t.Helper()
	return NewHost(testConn(t, "node-"+shell, shell, nil), opts)
}

// testConn is a local connection whose scripts run under shell (sh or
// bash, see shells) with env as their whole environment (nil: this test
// process's own).
func testConn(t testing.TB, name, shell string, env []string) transport.Conn {
	t.Helper()
	c, err := localconn.Dial(name, localconn.Options{Shell: shell, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeFile(t *testing.T, p string, b []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is filtered by the umask; tests want it exact.
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func allBytes() []byte {
	b := make([]byte, 0, 512)
	for i := 0; i < 512; i++ {
		b = append(b, byte(i))
	}
	return b
}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewSource(seed))
	r.Read(b)
	return b
}

func TestQueryFiles(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			dir := t.TempDir()
			large := randomBytes(1<<20, 1)
			files := map[string][]byte{
				"empty":      {},
				"binary":     allBytes(),
				"no-newline": []byte("last line"),
				"large":      large,
				"with space": []byte("a b\n"),
				"quote'\n":   []byte("odd name\n"),
			}
			var paths []string
			for name, b := range files {
				p := filepath.Join(dir, name)
				writeFile(t, p, b, 0o640)
				paths = append(paths, p)
			}
			if err := os.Chown(filepath.Join(dir, "empty"), 65534, 65534); err != nil {
				t.Fatal(err)
			}
			missing := filepath.Join(dir, "missing")
			sub := filepath.Join(dir, "sub")
			if err := os.Mkdir(sub, 0o750); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "link")
			if err := os.Symlink(filepath.Join(dir, "binary"), link); err != nil {
				t.Fatal(err)
			}
			proc := "/proc/sys/fs/inotify/max_user_instances"
			h := newTestHost(t, sh, HostOptions{})
			snap, err := h.Query(context.Background(), transport.Query{
				Files: append(paths, missing, sub, link, proc),
			})
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range files {
				fi := snap.File(filepath.Join(dir, name))
				if !fi.Exists || fi.IsDir || fi.Mode != 0o640 {
					t.Errorf("%q: exists=%v dir=%v mode=%v, want a 0640 file", name, fi.Exists, fi.IsDir, fi.Mode)
				}
				if !bytes.Equal(fi.Content, want) {
					t.Errorf("%q: content differs: got %d bytes, want %d", name, len(fi.Content), len(want))
				}
			}
			if e := snap.File(filepath.Join(dir, "empty")); e.UID != 65534 || e.GID != 65534 || e.Owner != "nobody" || e.Group != "nogroup" {
				t.Errorf("empty: owner %d(%s) group %d(%s), want nobody:nogroup", e.UID, e.Owner, e.GID, e.Group)
			}
			if b := snap.File(filepath.Join(dir, "binary")); b.Owner != "root" || b.Group != "root" || b.UID != 0 {
				t.Errorf("binary: owner %d(%s) group %s, want root:root", b.UID, b.Owner, b.Group)
			}
			if m := snap.File(missing); m.Exists {
				t.Errorf("missing file reported as existing")
			}
			if _, ok := snap.Files[missing]; !ok {
				t.Errorf("missing file has no entry")
			}
			if d := snap.File(sub); !d.Exists || !d.IsDir || d.Mode != fs.ModeDir|0o750 || len(d.Content) != 0 {
				t.Errorf("dir: %+v", d)
			}
			if l := snap.File(link); !bytes.Equal(l.Content, allBytes()) {
				t.Errorf("symlink not followed: %d bytes", len(l.Content))
			}
			wantProc, err := os.ReadFile(proc)
			if err != nil {
				t.Fatal(err)
			}
			if got := snap.File(proc).Content; len(got) == 0 || !bytes.Equal(got, wantProc) {
				t.Errorf("%s: got %q, want %q (stat reports size 0 for /proc files)", proc, got, wantProc)
			}
			if st := h.Stats(); st.RoundTrips != 1 || st.BytesReceived < 1<<20 {
				t.Errorf("stats %+v: want 1 round trip and the 1 MiB file received", st)
			}
		})
	}
}

func TestQueryGlobsSortBytewise(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "conf d")
			names := []string{"zz-x.toml", "99-nvidia.toml", "10-a.toml", "9-b.toml", "A.toml", "_u.toml", ".hidden.toml", "other.conf"}
			for _, n := range names {
				writeFile(t, filepath.Join(dir, n), []byte(n), 0o644)
			}
			glob := filepath.Join(dir, "*.toml")
			hidden := filepath.Join(dir, ".*.toml")
			none := filepath.Join(dir, "*.nothing")
			h := newTestHost(t, sh, HostOptions{})
			snap, err := h.Query(context.Background(), transport.Query{Globs: []string{glob, hidden, none}})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, n := range []string{"10-a.toml", "9-b.toml", "99-nvidia.toml", "A.toml", "_u.toml", "zz-x.toml"} {
				want = append(want, filepath.Join(dir, n))
			}
			if diff := cmp.Diff(want, snap.Globs[glob]); diff != "" {
				t.Errorf("glob order (-want +got):\n%s", diff)
			}
			if !sort.StringsAreSorted(snap.Globs[glob]) {
				t.Errorf("matches are not in byte order: %q", snap.Globs[glob])
			}
			if diff := cmp.Diff([]string{filepath.Join(dir, ".hidden.toml")}, snap.Globs[hidden]); diff != "" {
				t.Errorf("hidden glob (-want +got):\n%s", diff)
			}
			if got, ok := snap.Globs[none]; !ok || len(got) != 0 {
				t.Errorf("glob without matches: %q, present=%v; want an empty entry", got, ok)
			}
			for _, p := range want {
				if got := string(snap.File(p).Content); got != filepath.Base(p) {
					t.Errorf("%s: content %q", p, got)
				}
			}
		})
	}
}

func TestQueryCmds(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			h := newTestHost(t, sh, HostOptions{})
			stdin := randomBytes(100_000, 2)
			snap, err := h.Query(context.Background(), transport.Query{Cmds: []transport.Cmd{
				{Script: "printf 'out'; printf 'err\\n' >&2; exit 3"},
				{Argv: []string{"printf", "%s|", "it's", "a \"b\"", "$HOME", "", "line\nbreak"}},
				{Argv: []string{"cat"}, Stdin: stdin},
				{Script: "cat; echo done"},
				{Argv: []string{"no-such-command-nodeconverge"}},
				{Argv: []string{"exit", "4"}},
				// A Script runs in a subshell: the shell's usual IFS, no
				// arguments, and nothing it changes reaches the next one.
				{Script: `x="a b  c"; set -- $x; printf '%d %d' "$#" "${#IFS}"; cd /; X=1; IFS=:`},
				{Script: `printf '%s|%s|%s' "$PWD" "${X-unset}" "$IFS"`},
			}})
			if err != nil {
				t.Fatal(err)
			}
			c := snap.Cmds
			if string(c[0].Stdout) != "out" || string(c[0].Stderr) != "err\n" || c[0].ExitCode != 3 || c[0].OK() {
				t.Errorf("cmd 0: %q %q %d", c[0].Stdout, c[0].Stderr, c[0].ExitCode)
			}
			if got := string(c[1].Stdout); got != "it's|a \"b\"|$HOME||line\nbreak|" || !c[1].OK() {
				t.Errorf("cmd 1: argv not passed verbatim: %q", got)
			}
			if !bytes.Equal(c[2].Stdout, stdin) {
				t.Errorf("cmd 2: stdin not passed through: %d bytes", len(c[2].Stdout))
			}
			if string(c[3].Stdout) != "done\n" {
				t.Errorf("cmd 3: a command without Stdin must read nothing: %q", c[3].Stdout)
			}
			if c[4].ExitCode != 127 || !strings.Contains(string(c[4].Stderr), "not found") {
				t.Errorf("cmd 4: %d %q", c[4].ExitCode, c[4].Stderr)
			}
			if c[5].ExitCode != 4 {
				t.Errorf("cmd 5: a builtin in Argv must not end the script: exit %d", c[5].ExitCode)
			}
			if got := string(c[6].Stdout); got != "3 3" {
				t.Errorf("cmd 6: words and IFS length %q, want \"3 3\"", got)
			}
			if got, wd := string(c[7].Stdout), cwd(t); got != wd+"|unset| \t\n" {
				t.Errorf("cmd 7: %q: an earlier command's cd, variable or IFS leaked (want %q)", got, wd+"|unset| \t\n")
			}
		})
	}
}

func cwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

func TestQueryUnreadableFails(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{})
	// /proc/self/mem is a regular file that even root cannot read with cat.
	_, err := h.Query(context.Background(), transport.Query{Files: []string{"/proc/self/mem"}})
	var re *ReadError
	if !errors.As(err, &re) || re.Path != "/proc/self/mem" || !strings.Contains(re.Msg, "error") {
		t.Fatalf("got %v, want a ReadError naming /proc/self/mem", err)
	}
}

func TestQueryRejectsBadInput(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{})
	for _, q := range []transport.Query{
		{Files: []string{""}},
		{Files: []string{"/a\x00b"}},
		{Cmds: []transport.Cmd{{}}},
		{Cmds: []transport.Cmd{{Argv: []string{"echo", "a\x00"}}}},
	} {
		if _, err := h.Query(context.Background(), q); err == nil {
			t.Errorf("%+v: accepted", q)
		}
	}
	if st := h.Stats(); st.RoundTrips != 0 {
		t.Errorf("rejected queries made %d round trips", st.RoundTrips)
	}
}

// TestFramesTruncated feeds the parser every prefix of a real answer: each
// must be an error, never a panic or a short snapshot.
func TestFramesTruncated(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("content\n"), 0o644)
	q := transport.Query{Files: []string{p, filepath.Join(dir, "missing")}, Globs: []string{dir + "/*"}, Cmds: []transport.Cmd{{Script: "echo hi"}}}
	rec := &recordConn{Conn: localconn.New("l")}
	if _, err := NewHost(rec, HostOptions{StateDir: t.TempDir()}).Query(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	full := rec.last.Stdout
	m := regexp.MustCompile(`_nc_qm=(NCQ-[0-9a-f]+)`).FindStringSubmatch(rec.script)
	if m == nil {
		t.Fatal("no query marker in the script")
	}
	newSnap := func() *transport.Snapshot {
		return &transport.Snapshot{Files: map[string]*transport.FileInfo{}, Globs: map[string][]string{}, Cmds: make([]*transport.CmdResult, 1)}
	}
	if err := parseSnapshot(&frames{b: full, marker: m[1]}, q, newSnap()); err != nil {
		t.Fatalf("full answer: %v", err)
	}
	for n := 0; n < len(full); n++ {
		if err := parseSnapshot(&frames{b: full[:n], marker: m[1]}, q, newSnap()); err == nil {
			t.Fatalf("prefix of %d/%d bytes parsed without error", n, len(full))
		}
	}
	if err := parseSnapshot(&frames{b: append(append([]byte{}, full...), 'x'), marker: m[1]}, q, newSnap()); err == nil {
		t.Fatal("trailing garbage parsed without error")
	}
}

// recordConn keeps the last script it ran and the result its Conn returned.
type recordConn struct {
	transport.Conn
	script string
	last   *transport.CmdResult
}

func (r *recordConn) Run(ctx context.Context, script string, stdin []byte) (*transport.CmdResult, error) {
	res, err := r.Conn.Run(ctx, script, stdin)
	r.script, r.last = script, res
	return res, err
}

// growConn appends to a file between the stat and the cat of the first
// script it runs, as another writer on the node might.
type growConn struct {
	transport.Conn
	path string
	runs int
}

func (g *growConn) Run(ctx context.Context, script string, stdin []byte) (*transport.CmdResult, error) {
	g.runs++
	if g.runs == 1 {
		script = strings.Replace(script, "\tif cat -- \"$T/st\"", "\tprintf more >> "+transport.ShellQuote(g.path)+"\n\tif cat -- \"$T/st\"", 1)
	}
	return g.Conn.Run(ctx, script, stdin)
}

// TestQueryTornRead checks that a file that grows between the stat that
// sizes it and the cat that prints it is read again, not cut or misframed.
func TestQueryTornRead(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			writeFile(t, a, []byte("first\n"), 0o644)
			writeFile(t, b, []byte("second\n"), 0o600)
			g := &growConn{Conn: testConn(t, "node-"+sh, sh, nil), path: a}
			snap, err := NewHost(g, HostOptions{}).Query(context.Background(), transport.Query{Files: []string{a, b}})
			if err != nil {
				t.Fatal(err)
			}
			if g.runs != 2 {
				t.Errorf("%d round trips, want 2 (the torn read, then the copies)", g.runs)
			}
			if got := string(snap.File(a).Content); got != "first\nmore" {
				t.Errorf("a: %q", got)
			}
			if got := snap.File(b); string(got.Content) != "second\n" || got.Mode != 0o600 {
				t.Errorf("b: %q %v", got.Content, got.Mode)
			}
		})
	}
}

func TestStage(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			h := newTestHost(t, sh, HostOptions{})
			bin := randomBytes(300_000, 3)
			res, err := h.Stage(context.Background(), transport.StageRequest{
				Files: map[string]transport.StagedFile{
					"config.toml":     {Content: []byte("version = 2\n")},
					"conf.d/b.bin":    {Content: bin, Mode: 0o600},
					"conf.d/deep/c":   {Content: nil},
					"odd name's file": {Content: []byte("x")},
					"bin/run":         {Content: []byte("#!/bin/sh\n"), Mode: fs.ModeSetuid | 0o750},
				},
				Cmds: []transport.Cmd{
					{Script: `printf '%s' "$SCRATCH"`},
					{Script: `pwd; cat config.toml; stat -c '%a %s' conf.d/b.bin conf.d/deep/c config.toml "odd name's file" bin/run; stat -c %a "$SCRATCH"`},
					{Script: `exit 5`},
					{Argv: []string{"cat", "conf.d/b.bin"}},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			scratch := string(res[0].Stdout)
			if !filepath.IsAbs(scratch) {
				t.Fatalf("SCRATCH = %q", scratch)
			}
			want := fmt.Sprintf("%s\nversion = 2\n600 300000\n644 0\n644 12\n644 1\n4750 10\n700\n", scratch)
			if got := string(res[1].Stdout); got != want || !res[1].OK() {
				t.Errorf("staged layout:\n got %q (stderr %q)\nwant %q", got, res[1].Stderr, want)
			}
			if res[2].ExitCode != 5 {
				t.Errorf("cmd 2 exit %d, want 5", res[2].ExitCode)
			}
			if !bytes.Equal(res[3].Stdout, bin) {
				t.Errorf("binary staged file differs")
			}
			if _, err := os.Stat(scratch); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("scratch dir %s still there after Stage: %v", scratch, err)
			}
			if _, err := os.Stat(filepath.Dir(scratch)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("temp dir %s still there after Stage: %v", filepath.Dir(scratch), err)
			}
		})
	}
}

func TestStageRejectsEscapes(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{})
	for _, name := range []string{"../x", "/etc/passwd", "a/../../x", "a/..", "", ".", "a\x00b"} {
		_, err := h.Stage(context.Background(), transport.StageRequest{Files: map[string]transport.StagedFile{name: {Content: []byte("x")}}})
		if err == nil {
			t.Errorf("%q: accepted", name)
		}
	}
	if st := h.Stats(); st.RoundTrips != 0 {
		t.Errorf("rejected requests made %d round trips", st.RoundTrips)
	}
}

func TestStageFileConflictFails(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{})
	_, err := h.Stage(context.Background(), transport.StageRequest{Files: map[string]transport.StagedFile{
		"a":   {Content: []byte("file")},
		"a/b": {Content: []byte("under a file")},
	}})
	if err == nil || !strings.Contains(err.Error(), "a/b") {
		t.Fatalf("got %v, want an error naming a/b", err)
	}
	_, err = h.Stage(context.Background(), transport.StageRequest{Files: map[string]transport.StagedFile{
		"d/x":   {Content: []byte("one")},
		"d/./x": {Content: []byte("two")},
	}})
	if err == nil || !strings.Contains(err.Error(), "d/./x") {
		t.Fatalf("got %v, want an error naming d/./x", err)
	}
	if st := h.Stats(); st.RoundTrips != 0 {
		t.Errorf("%d round trips: a layout that cannot be made must be refused before the node is asked", st.RoundTrips)
	}
}

func modeOf(t *testing.T, p string) fs.FileMode {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode()
}

func TestApply(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			root := t.TempDir()
			state := filepath.Join(root, "state")
			live := filepath.Join(root, "etc")
			runID := "20261129T211000Z-abcd"
			h := newTestHost(t, sh, HostOptions{RunID: runID, StateDir: state})

			existing := filepath.Join(live, "existing.toml")
			writeFile(t, existing, []byte("old\n"), 0o600)
			if err := os.Chown(existing, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			moved := filepath.Join(live, "conf.d", "zz-labhub.toml")
			writeFile(t, moved, []byte("registry\n"), 0o640)
			removed := filepath.Join(live, "conf.d", "gone.toml")
			writeFile(t, removed, []byte("gone\n"), 0o644)

			created := filepath.Join(live, "new", "dir", "created.toml")
			explicit := filepath.Join(live, "explicit")
			big := randomBytes(1<<20, 4)
			ops := []transport.Op{
				{Kind: transport.OpWrite, Path: created, Content: big},
				{Kind: transport.OpWrite, Path: existing, Content: []byte("new\n"), Backup: true},
				{Kind: transport.OpWrite, Path: explicit, Content: nil, Mode: 0o640 | fs.ModeSetgid, Owner: "nobody", Group: "nogroup"},
				{Kind: transport.OpMove, From: moved, Path: filepath.Join(live, "disabled", "zz-labhub.toml"), Backup: true},
				{Kind: transport.OpRemove, Path: removed, Backup: true},
				{Kind: transport.OpRemove, Path: filepath.Join(live, "never-existed")},
			}
			res, err := h.Apply(context.Background(), ops)
			if err != nil {
				t.Fatal(err)
			}
			bk := func(p string) string { return filepath.Join(state, "backups", runID) + p }
			want := []transport.OpResult{
				{Path: created},
				{Path: existing, BackupPath: bk(existing)},
				{Path: explicit},
				{Path: ops[3].Path, BackupPath: bk(moved)},
				{Path: removed, BackupPath: bk(removed)},
				{Path: ops[5].Path},
			}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}

			if got, err := os.ReadFile(created); err != nil || !bytes.Equal(got, big) {
				t.Errorf("created: %v, %d bytes", err, len(got))
			}
			if m := modeOf(t, created); m != 0o644 {
				t.Errorf("new file mode %v, want 0644", m)
			}
			if m := modeOf(t, filepath.Join(live, "new")); m != fs.ModeDir|0o755 {
				t.Errorf("new parent dir mode %v, want 0755", m)
			}

			if got, _ := os.ReadFile(existing); string(got) != "new\n" {
				t.Errorf("existing: %q", got)
			}
			st, err := os.Stat(existing)
			if err != nil {
				t.Fatal(err)
			}
			if sys := st.Sys().(*syscall.Stat_t); st.Mode() != 0o600 || sys.Uid != 65534 || sys.Gid != 65534 {
				t.Errorf("existing: mode %v owner %d:%d, want its old 0600 nobody:nogroup", st.Mode(), sys.Uid, sys.Gid)
			}
			if got, _ := os.ReadFile(bk(existing)); string(got) != "old\n" || modeOf(t, bk(existing)) != 0o600 {
				t.Errorf("backup of existing: %q mode %v", got, modeOf(t, bk(existing)))
			}
			if m := modeOf(t, filepath.Join(state, "backups", runID)); m != fs.ModeDir|0o700 {
				t.Errorf("run backup dir mode %v, want 0700", m)
			}

			st, err = os.Stat(explicit)
			if err != nil {
				t.Fatal(err)
			}
			if sys := st.Sys().(*syscall.Stat_t); st.Mode() != 0o640|fs.ModeSetgid || sys.Uid != 65534 || sys.Gid != 65534 || st.Size() != 0 {
				t.Errorf("explicit: mode %v owner %d:%d size %d", st.Mode(), sys.Uid, sys.Gid, st.Size())
			}

			if _, err := os.Stat(moved); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("move source still there: %v", err)
			}
			if got, _ := os.ReadFile(ops[3].Path); string(got) != "registry\n" || modeOf(t, ops[3].Path) != 0o640 {
				t.Errorf("move target: %q", got)
			}
			if got, _ := os.ReadFile(bk(moved)); string(got) != "registry\n" {
				t.Errorf("move backup: %q", got)
			}
			if _, err := os.Stat(removed); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("removed file still there: %v", err)
			}
			if got, _ := os.ReadFile(bk(removed)); string(got) != "gone\n" {
				t.Errorf("remove backup: %q", got)
			}
			for _, d := range []string{live, filepath.Join(live, "conf.d"), filepath.Join(live, "new", "dir")} {
				for _, n := range entries(t, d) {
					if strings.HasPrefix(n, ".nodeconverge.") {
						t.Errorf("temporary file left: %s/%s", d, n)
					}
				}
			}
			if st := h.Stats(); st.RoundTrips != 1 {
				t.Errorf("%d round trips, want 1", st.RoundTrips)
			}

			// A second write of the same path in the same run keeps the
			// first backup: the backup is the state before the run.
			if _, err := h.Apply(context.Background(), []transport.Op{{Kind: transport.OpWrite, Path: existing, Content: []byte("newer\n"), Backup: true}}); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(bk(existing)); string(got) != "old\n" {
				t.Errorf("backup overwritten within a run: %q", got)
			}
		})
	}
}

func TestApplyFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.toml")
	writeFile(t, target, []byte("old"), 0o600)
	link := filepath.Join(dir, "link.toml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	h := newTestHost(t, "sh", HostOptions{StateDir: filepath.Join(dir, "state")})
	if _, err := h.Apply(context.Background(), []transport.Op{{Kind: transport.OpWrite, Path: link, Content: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	if modeOf(t, link)&fs.ModeSymlink == 0 {
		t.Errorf("symlink replaced by a file")
	}
	if got, _ := os.ReadFile(target); string(got) != "new" || modeOf(t, target) != 0o600 {
		t.Errorf("target: %q mode %v", got, modeOf(t, target))
	}
}

func TestApplyStopsAtFirstFailure(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			dir := t.TempDir()
			h := newTestHost(t, sh, HostOptions{StateDir: filepath.Join(dir, "state")})
			blocker := filepath.Join(dir, "blocker")
			writeFile(t, blocker, []byte("a file where a directory is needed"), 0o644)
			first := filepath.Join(dir, "first")
			third := filepath.Join(dir, "third")
			ops := []transport.Op{
				{Kind: transport.OpWrite, Path: first, Content: []byte("1")},
				{Kind: transport.OpWrite, Path: filepath.Join(blocker, "second"), Content: []byte("2")},
				{Kind: transport.OpWrite, Path: third, Content: []byte("3")},
			}
			res, err := h.Apply(context.Background(), ops)
			var opErr *OpError
			if !errors.As(err, &opErr) || opErr.Index != 1 || !strings.Contains(err.Error(), "blocker/second") || opErr.Stderr == "" {
				t.Fatalf("got %v, want an OpError for op 1 with the remote stderr", err)
			}
			if diff := cmp.Diff([]transport.OpResult{{Path: first}}, res); diff != "" {
				t.Errorf("completed ops (-want +got):\n%s", diff)
			}
			if got, _ := os.ReadFile(first); string(got) != "1" {
				t.Errorf("first op not done: %q", got)
			}
			if _, err := os.Stat(third); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("op after the failure ran: %v", err)
			}
		})
	}
}

func TestApplyRefusals(t *testing.T) {
	dir := t.TempDir()
	h := newTestHost(t, "sh", HostOptions{StateDir: filepath.Join(dir, "state")})
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	remote := []transport.Op{
		{Kind: transport.OpWrite, Path: sub, Content: []byte("x")},
		{Kind: transport.OpRemove, Path: sub},
		{Kind: transport.OpMove, From: filepath.Join(dir, "missing"), Path: filepath.Join(dir, "to")},
	}
	for _, op := range remote {
		if _, err := h.Apply(context.Background(), []transport.Op{op}); err == nil {
			t.Errorf("%+v: accepted", op)
		}
	}
	if _, err := os.Stat(sub); err != nil {
		t.Errorf("directory damaged by a refused op: %v", err)
	}
	local := []transport.Op{
		{Kind: transport.OpWrite, Path: "relative"},
		{Kind: transport.OpWrite, Path: "/"},
		{Kind: transport.OpWrite, Path: dir + "/../x"},
		{Kind: transport.OpMove, From: "", Path: filepath.Join(dir, "x")},
		{Kind: "chmod", Path: filepath.Join(dir, "x")},
	}
	before := h.Stats().RoundTrips
	for _, op := range local {
		if _, err := h.Apply(context.Background(), []transport.Op{op}); err == nil {
			t.Errorf("%+v: accepted", op)
		}
	}
	if n := h.Stats().RoundTrips - before; n != 0 {
		t.Errorf("invalid ops made %d round trips", n)
	}
	bad := NewHost(localconn.New("l"), HostOptions{RunID: "../escape", StateDir: filepath.Join(dir, "state")})
	if _, err := bad.Apply(context.Background(), []transport.Op{{Kind: transport.OpRemove, Path: filepath.Join(dir, "x"), Backup: true}}); err == nil {
		t.Errorf("run id with a slash accepted")
	}
}

// oldBackups is a node with four earlier runs' backups, a file to write
// and a Host keeping 3 runs' backups: the pruning tests' setup.
func oldBackups(t *testing.T) (h *Host, backups string, old []string, target, run string) {
	t.Helper()
	dir := t.TempDir()
	backups = filepath.Join(dir, "state", "backups")
	old = []string{"20240101T000000Z-0001", "20250101T000000Z-0002", "20250601T000000Z-0003", "20251231T000000Z-0004"}
	for _, id := range old {
		writeFile(t, filepath.Join(backups, id, "etc", "f"), []byte(id), 0o644)
	}
	target = filepath.Join(dir, "f")
	writeFile(t, target, []byte("x"), 0o644)
	run = "20261129T211000Z-abcd"
	h = newTestHost(t, "sh", HostOptions{RunID: run, StateDir: filepath.Join(dir, "state"), KeepBackups: 3})
	return h, backups, old, target, run
}

func TestApplyPrunesOldBackups(t *testing.T) {
	h, backups, _, target, run := oldBackups(t)
	if _, err := h.Apply(context.Background(), []transport.Op{{Kind: transport.OpWrite, Path: target, Content: []byte("y"), Backup: true}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"20250601T000000Z-0003", "20251231T000000Z-0004", run}
	if diff := cmp.Diff(want, entries(t, backups)); diff != "" {
		t.Errorf("backup dirs (-want +got):\n%s", diff)
	}
}

// TestApplyKeepsOwingRunsBackups: a run still owed a handler keeps its
// backups however old, so the owed restart can roll it back.
func TestApplyKeepsOwingRunsBackups(t *testing.T) {
	h, backups, old, target, run := oldBackups(t)
	h.KeepRuns([]string{old[0], "it's not a dir"})
	if _, err := h.Apply(context.Background(), []transport.Op{{Kind: transport.OpWrite, Path: target, Content: []byte("y"), Backup: true}}); err != nil {
		t.Fatal(err)
	}
	want := []string{old[0], old[3], run}
	if diff := cmp.Diff(want, entries(t, backups)); diff != "" {
		t.Errorf("backup dirs (-want +got):\n%s", diff)
	}
}

func TestExec(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{})
	in := randomBytes(50_000, 5)
	res, err := h.Exec(context.Background(), transport.Cmd{Argv: []string{"sha256sum"}, Stdin: in})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%x  -\n", sha256.Sum256(in))
	if !res.OK() || string(res.Stdout) != want {
		t.Errorf("stdin did not reach the command intact: %q, want %q", res.Stdout, want)
	}
	fail, err := h.Exec(context.Background(), transport.Cmd{Script: "echo bad >&2; exit 9"})
	if err != nil {
		t.Fatal(err)
	}
	if fail.ExitCode != 9 || string(fail.Stderr) != "bad\n" {
		t.Errorf("failing command: %d %q", fail.ExitCode, fail.Stderr)
	}
	// A user's command gets a shell of its own, not the script's variables.
	own, err := h.Exec(context.Background(), transport.Cmd{Script: `printf '%s|%s' "${T-unset}" "${_nc_qm-unset}"`})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(own.Stdout); got != "unset|unset" {
		t.Errorf("an Exec script saw the node script's variables: %q", got)
	}
	// What a command touched is read back with it: the next Query of
	// those paths costs no round trip, a missing one is known missing,
	// and an unreadable one neither fails the Exec nor is remembered.
	dir := t.TempDir()
	made, gone := filepath.Join(dir, "made"), filepath.Join(dir, "gone")
	touched, err := h.Exec(context.Background(), transport.Cmd{
		Argv:    []string{"sh", "-c", `printf 'v=1\n' > "$1"; rm -f "$2"`, "sh", made, gone},
		Touches: []string{made, gone, "/proc/self/mem", dir},
	})
	if err != nil || !touched.OK() {
		t.Fatalf("exec with touches: %v %+v", err, touched)
	}
	snap, err := h.Query(context.Background(), transport.Query{Files: []string{made, gone}})
	if err != nil {
		t.Fatal(err)
	}
	if string(snap.File(made).Content) != "v=1\n" || snap.File(gone).Exists {
		t.Errorf("read back: %q, gone exists %v", snap.File(made).Content, snap.File(gone).Exists)
	}
	if st := h.Stats(); st.RoundTrips != 4 {
		t.Errorf("%d round trips: the Query after the Exec was not answered from what it read back", st.RoundTrips)
	}
	if _, err := h.Query(context.Background(), transport.Query{Files: []string{"/proc/self/mem"}}); err == nil {
		t.Error("an unreadable touched path was remembered as readable")
	}
	if st := h.Stats(); st.RoundTrips != 5 || st.BytesSent < 50_000 {
		t.Errorf("stats %+v", st)
	}
}

func TestExecCancel(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	marker := filepath.Join(t.TempDir(), "started")
	go func() {
		_, err := h.Exec(ctx, transport.Cmd{Script: "touch " + transport.ShellQuote(marker) + "; exec sleep 30"})
		done <- err
	}()
	// Wait for the command to have started, by polling the file it makes.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > localconn.WaitDelay {
		t.Errorf("cancel took %v", d)
	}
}

func TestReadOnly(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{})
	r := transport.ReadOnly(h)
	if _, ok := r.(transport.Writer); ok {
		t.Fatal("ReadOnly(w) can be asserted to Writer")
	}
	if _, ok := r.(interface {
		Apply(context.Context, []transport.Op) ([]transport.OpResult, error)
	}); ok {
		t.Fatal("ReadOnly(w) has an Apply method")
	}
	if _, ok := r.(interface {
		Exec(context.Context, transport.Cmd) (*transport.CmdResult, error)
	}); ok {
		t.Fatal("ReadOnly(w) has an Exec method")
	}
	snap, err := r.Query(context.Background(), transport.Query{Cmds: []transport.Cmd{{Script: "echo ok"}}})
	if err != nil || string(snap.Cmds[0].Stdout) != "ok\n" {
		t.Fatalf("query through ReadOnly: %v", err)
	}
	if r.Host() != h.Host() {
		t.Errorf("Host() = %q, want %q", r.Host(), h.Host())
	}
	res, err := r.Stage(context.Background(), transport.StageRequest{Cmds: []transport.Cmd{{Script: "echo staged"}}})
	if err != nil || string(res[0].Stdout) != "staged\n" {
		t.Fatalf("stage through ReadOnly: %v", err)
	}
}

// TestShellQuoteRoundTrip quotes random strings, has the real shell print
// them back NUL-separated, and compares.
func TestShellQuoteRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	inputs := []string{"", "'", "''", `"`, "\\", "\n", "a b", "$(echo pwned)", "`x`", "~root", "a=b", "-n", "*", "!x", "%s", "é", "\t", "{a,b}"}
	alphabet := "ab '\"\\\n\t$`*?[]{}()<>|&;#~=!%-_./:,@+é"
	for i := 0; i < 300; i++ {
		n := r.Intn(20)
		var b strings.Builder
		for j := 0; j < n; j++ {
			if r.Intn(4) == 0 {
				b.WriteByte(byte(1 + r.Intn(255)))
			} else {
				b.WriteByte(alphabet[r.Intn(len(alphabet))])
			}
		}
		inputs = append(inputs, b.String())
	}
	var script strings.Builder
	script.WriteString("printf '%s\\0'")
	for _, s := range inputs {
		script.WriteString(" " + transport.ShellQuote(s))
	}
	script.WriteString("\n")
	for _, sh := range shells {
		res, err := testConn(t, "l", sh, nil).Run(context.Background(), script.String(), nil)
		if err != nil || !res.OK() {
			t.Fatalf("%s: %v %q", sh, err, res.Stderr)
		}
		got := strings.Split(strings.TrimSuffix(string(res.Stdout), "\x00"), "\x00")
		if diff := cmp.Diff(inputs, got); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", sh, diff)
		}
	}
	if transport.ShellQuote("/etc/containerd/config.toml") != "/etc/containerd/config.toml" {
		t.Errorf("safe path quoted: %s", transport.ShellQuote("/etc/containerd/config.toml"))
	}
}

func BenchmarkQuery(b *testing.B) {
	dir := b.TempDir()
	var files []string
	for i := 0; i < 10; i++ {
		p := filepath.Join(dir, fmt.Sprintf("%02d.toml", i))
		if err := os.WriteFile(p, bytes.Repeat([]byte("key = \"value\"\n"), 100), 0o644); err != nil {
			b.Fatal(err)
		}
		files = append(files, p)
	}
	h := NewHost(localconn.New("bench"), HostOptions{StateDir: b.TempDir()})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Query(context.Background(), transport.Query{Files: files}); err != nil {
			b.Fatal(err)
		}
	}
	st := h.Stats()
	b.ReportMetric(float64(st.BytesSent)/float64(b.N), "sent/op")
	b.ReportMetric(float64(st.BytesReceived)/float64(b.N), "recv/op")
}

// TestQueryMemo checks that a Memo command runs once per program file: a
// later run is answered from the node's kept output until the file
// changes, and output that a failure or stderr marks as unusual is never
// kept.
func TestQueryMemo(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			bin := filepath.Join(dir, "bin")
			runs := filepath.Join(dir, "runs")
			prog := func(name, body string) {
				writeFile(t, filepath.Join(bin, name), []byte("#!/bin/sh\necho x >> "+runs+"\n"+body+"\n"), 0o755)
			}
			count := func() int {
				b, err := os.ReadFile(runs)
				if errors.Is(err, fs.ErrNotExist) {
					return 0
				}
				if err != nil {
					t.Fatal(err)
				}
				return bytes.Count(b, []byte("x"))
			}
			env := []string{"PATH=" + bin + ":/usr/bin:/bin", "LC_ALL=C"}
			query := func(argv ...string) *transport.CmdResult {
				t.Helper()
				h := NewHost(testConn(t, "node-"+sh, sh, env), HostOptions{StateDir: state})
				snap, err := h.Query(context.Background(), transport.Query{Cmds: []transport.Cmd{{Argv: argv, Memo: true}}})
				if err != nil {
					t.Fatal(err)
				}
				return snap.Cmds[0]
			}
			prog("ctrd", `printf 'ctrd v1.7.0\nsecond line'`)
			for i := range 3 {
				// By name (found in PATH) and by path: the same file, the same kept output.
				name := "ctrd"
				if i == 2 {
					name = filepath.Join(bin, "ctrd")
				}
				r := query(name, "--version")
				if !r.OK() || string(r.Stdout) != "ctrd v1.7.0\nsecond line" || len(r.Stderr) != 0 {
					t.Fatalf("run %d: %d %q %q", i, r.ExitCode, r.Stdout, r.Stderr)
				}
			}
			if n := count(); n != 1 {
				t.Fatalf("the program ran %d times for 3 queries, want 1", n)
			}
			if r := query("ctrd", "--help"); !r.OK() || count() != 2 {
				t.Fatalf("another argv must not share the kept output: %q, %d runs", r.Stdout, count())
			}
			// A new binary (another size, a new inode) is asked again.
			if err := os.Remove(filepath.Join(bin, "ctrd")); err != nil {
				t.Fatal(err)
			}
			prog("ctrd", `echo 'ctrd v2.1.4'`)
			if r := query("ctrd", "--version"); string(r.Stdout) != "ctrd v2.1.4\n" || count() != 3 {
				t.Fatalf("after the binary changed: %q, %d runs", r.Stdout, count())
			}
			if r := query("ctrd", "--version"); string(r.Stdout) != "ctrd v2.1.4\n" || count() != 3 {
				t.Fatalf("the new binary's output was not kept: %q, %d runs", r.Stdout, count())
			}
			old, err := filepath.Glob(filepath.Join(state, "memo", "*"))
			if err != nil || len(old) != 2 {
				t.Fatalf("memo files %v (%v): the replaced binary's output must be dropped", old, err)
			}
			// Failures and warnings are asked every time.
			prog("warn", `echo v; echo careful >&2`)
			prog("fail", `echo v; exit 3`)
			for range 2 {
				if r := query("warn"); string(r.Stderr) != "careful\n" {
					t.Fatalf("warn: %q", r.Stderr)
				}
				if r := query("fail"); r.ExitCode != 3 {
					t.Fatalf("fail: exit %d", r.ExitCode)
				}
			}
			if n := count(); n != 7 {
				t.Fatalf("%d runs, want 7: a failure or stderr must not be kept", n)
			}
			if r := query("no-such-program-nodeconverge"); r.ExitCode != 127 {
				t.Fatalf("missing program: exit %d", r.ExitCode)
			}
		})
	}
}

// noclobberConn makes a write's temporary file name look taken, so the
// mktemp fallback of _nc_write runs.
type noclobberConn struct{ transport.Conn }

func (c noclobberConn) Run(ctx context.Context, script string, stdin []byte) (*transport.CmdResult, error) {
	const create = `{ true > "$_nc_t"; } 2> /dev/null`
	if !strings.Contains(script, create) {
		return nil, fmt.Errorf("the script no longer creates its temporary file with %s", create)
	}
	return c.Conn.Run(ctx, strings.Replace(script, create, "false", 1), stdin)
}

// TestApplyModes checks the modes and owners a write leaves, whether the
// temporary file was created with the mode's umask or (its name taken)
// made by mktemp: a new file is 0644 or its op's mode, an existing file
// keeps its mode and owner, and a file in a setgid directory keeps the
// group it had, not the directory's.
func TestApplyModes(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("mktemp=%v", fallback), func(t *testing.T) {
			root := t.TempDir()
			var c transport.Conn = testConn(t, "node", "sh", nil)
			if fallback {
				c = noclobberConn{c}
			}
			h := NewHost(c, HostOptions{RunID: "20261201T080000Z-modes", StateDir: filepath.Join(root, "state")})
			plain, private, kept := filepath.Join(root, "plain"), filepath.Join(root, "private"), filepath.Join(root, "kept")
			writeFile(t, kept, []byte("old\n"), 0o640)
			sgid := filepath.Join(root, "sgid")
			if err := os.Mkdir(sgid, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(sgid, 0, 65534); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(sgid, 0o755|fs.ModeSetgid); err != nil {
				t.Fatal(err)
			}
			inSgid := filepath.Join(sgid, "f")
			writeFile(t, inSgid, []byte("old\n"), 0o644)
			if err := os.Chown(inSgid, 0, 0); err != nil {
				t.Fatal(err)
			}
			_, err := h.Apply(context.Background(), []transport.Op{
				{Kind: transport.OpWrite, Path: plain, Content: []byte("a\n")},
				{Kind: transport.OpWrite, Path: private, Content: []byte("b\n"), Mode: 0o600},
				{Kind: transport.OpWrite, Path: kept, Content: []byte("c\n")},
				{Kind: transport.OpWrite, Path: inSgid, Content: []byte("d\n")},
			})
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]fs.FileMode{plain: 0o644, private: 0o600, kept: 0o640, inSgid: 0o644} {
				if m := modeOf(t, p); m != want {
					t.Errorf("%s: mode %v, want %v", filepath.Base(p), m, want)
				}
			}
			st, err := os.Stat(inSgid)
			if err != nil {
				t.Fatal(err)
			}
			if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 0 {
				t.Errorf("a file in a setgid directory took its group %d, want its own 0", gid)
			}
			for _, d := range []string{root, sgid} {
				for _, n := range entries(t, d) {
					if strings.HasPrefix(n, ".nodeconverge.") {
						t.Errorf("temporary file %s left in %s", n, d)
					}
				}
			}
		})
	}
}

// TestExecThen: an Exec's Then query is answered in the Exec's round trip,
// after the command, and fills the read cache; after a failed command it is
// not run; a part the node cannot read leaves the query to a round trip of
// its own.
func TestExecThen(t *testing.T) {
	ctx := context.Background()
	for _, sh := range []string{"sh", "bash"} {
		t.Run(sh, func(t *testing.T) {
			h := newTestHost(t, sh, HostOptions{})
			dir := t.TempDir()
			conf := filepath.Join(dir, "a.toml")
			ran := filepath.Join(dir, "then-ran")
			q := transport.Query{Files: []string{conf}, Globs: []string{filepath.Join(dir, "*.toml")},
				Cmds: []transport.Cmd{{Argv: []string{"sh", "-c", `touch "$1"; cat "$2"`, "then", ran, conf}}}}
			res, err := h.Exec(ctx, transport.Cmd{Argv: []string{"sh", "-c", `echo made > "$1"`, "cmd", conf}, Touches: []string{}, Then: &q})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() {
				t.Fatalf("command: %+v", res)
			}
			trips := h.Stats().RoundTrips
			snap, err := h.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if h.Stats().RoundTrips != trips {
				t.Error("the Then query went to the node again")
			}
			// Read after the command: its write is in the answer.
			if got := string(snap.File(conf).Content); got != "made\n" {
				t.Errorf("Then read %q, want the command's write", got)
			}
			if got := snap.Globs[q.Globs[0]]; len(got) != 1 || got[0] != conf {
				t.Errorf("glob matched %v", got)
			}
			if c := snap.Cmds[0]; c == nil || string(c.Stdout) != "made\n" {
				t.Errorf("Then command answered %+v", c)
			}

			// A failed command: Then does not run, and the next Query asks.
			if err := os.Remove(ran); err != nil {
				t.Fatal(err)
			}
			res, err = h.Exec(ctx, transport.Cmd{Argv: []string{"false"}, Touches: []string{}, Then: &q})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() {
				t.Fatal("false succeeded")
			}
			if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Then ran after a failed command: %v", err)
			}
			trips = h.Stats().RoundTrips
			if _, err := h.Query(ctx, q); err != nil || h.Stats().RoundTrips != trips+1 {
				t.Errorf("after a failed command the Query was answered without the node (err %v)", err)
			}

			// A directory among the glob's matches is not a regular file:
			// the soft read leaves it out, and the Query asks the node.
			if err := os.Mkdir(filepath.Join(dir, "d.toml"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Exec(ctx, transport.Cmd{Argv: []string{"true"}, Touches: []string{}, Then: &q}); err != nil {
				t.Fatal(err)
			}
			trips = h.Stats().RoundTrips
			snap, err = h.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if h.Stats().RoundTrips != trips+1 || len(snap.Globs[q.Globs[0]]) != 2 {
				t.Errorf("an incomplete Then answer was cached: %d round trips, matches %v", h.Stats().RoundTrips-trips, snap.Globs[q.Globs[0]])
			}
		})
	}
}
