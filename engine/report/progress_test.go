package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// screen renders what a terminal would show for b: \r moves to column 0,
// ESC[K erases to the end of the line, \n starts a new line, other bytes
// overwrite. Any other escape fails the test, so Progress cannot start
// using sequences this test does not understand.
func screen(t *testing.T, b []byte) []string {
	t.Helper()
	lines := []string{""}
	col := 0
	for i := 0; i < len(b); i++ {
		cur := &lines[len(lines)-1]
		switch {
		case b[i] == '\n':
			lines = append(lines, "")
			col = 0
		case b[i] == '\r':
			col = 0
		case bytes.HasPrefix(b[i:], []byte("\x1b[K")):
			*cur = (*cur)[:col]
			i += 2
		case b[i] < 0x20 || b[i] == 0x7f:
			t.Fatalf("unexpected control byte %q at %d in %q", b[i], i, b)
		case col < len(*cur):
			*cur = (*cur)[:col] + string(b[i]) + (*cur)[col+1:]
			col++
		default:
			*cur += string(b[i])
			col++
		}
	}
	return lines
}

// play drives an observer through one play of three hosts and two tasks,
// the second with a failure, then ends the run.
func play(o Observer) *Run {
	r := NewRun("id", true)
	hosts := []string{"nuc1", "nuc2", "omen"}
	o.PlayStart("gpu", hosts)
	o.TaskStart("install runtime", false)
	for _, h := range hosts {
		tr := &TaskResult{Play: "gpu", Task: "install runtime", Host: h, Status: OK}
		r.Add(tr)
		o.Result(tr)
	}
	o.TaskStart("relocate drop-ins", false)
	for i, h := range hosts {
		tr := &TaskResult{Play: "gpu", Task: "relocate drop-ins", Host: h, Status: Changed}
		if i == 2 {
			tr.Status, tr.Msg = Failed, "main config does not parse"
		}
		r.Add(tr)
		o.Result(tr)
	}
	o.Done(r)
	return r
}

var controlBytes = regexp.MustCompile(`[\x00-\x08\x0b-\x1f\x7f]`)

func TestProgressPipeHasNoControlCharacters(t *testing.T) {
	var stderr, stdout bytes.Buffer
	play(&Progress{W: &stderr, TTY: false, Next: &Human{W: &stdout}})
	if stderr.Len() != 0 {
		t.Errorf("progress wrote %q to a pipe", stderr.String())
	}
	if loc := controlBytes.FindIndex(stdout.Bytes()); loc != nil {
		t.Errorf("control byte %q in piped output:\n%q", stdout.Bytes()[loc[0]], stdout.String())
	}
	// The wrapper must not swallow the human output it wraps.
	for _, want := range []string{"TASK [install runtime]", "ok: [nuc2]", "failed: [omen] => main config does not parse", "RECAP"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("piped output lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestProgressTerminalRedraws(t *testing.T) {
	var stderr, stdout bytes.Buffer
	play(&Progress{W: &stderr, TTY: true, Next: &Human{W: &stdout}})
	got := stderr.String()
	for _, want := range []string{
		"\r\x1b[KTASK [install runtime]: 0/3 hosts",
		"\r\x1b[KTASK [install runtime]: 1/3 hosts",
		"\r\x1b[KTASK [install runtime]: 2/3 hosts",
		"\r\x1b[KTASK [relocate drop-ins]: 2/3 hosts",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("progress lacks %q:\n%q", want, got)
		}
	}
	if strings.Contains(got, "3/3") {
		t.Errorf("a finished task is drawn instead of cleared:\n%q", got)
	}
	if strings.Contains(got, "\n") {
		t.Errorf("progress must redraw one line, not print lines:\n%q", got)
	}
	if !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("the line is not cleared at the end:\n%q", got)
	}
	if s := screen(t, stderr.Bytes()); len(s) != 1 || s[0] != "" {
		t.Errorf("terminal still shows %q after the run", s)
	}
}

// TestProgressSharedTerminal writes progress and human output to one
// terminal, as in an interactive run, and checks that the screen holds
// exactly the human output: every redraw was erased before a line was
// printed over it.
func TestProgressSharedTerminal(t *testing.T) {
	var term, alone bytes.Buffer
	play(&Progress{W: &term, TTY: true, Next: &Human{W: &term}})
	play(&Human{W: &alone})
	got, want := screen(t, term.Bytes()), screen(t, alone.Bytes())
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("terminal shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Mid-task the last line of the screen is the progress line.
	term.Reset()
	p := &Progress{W: &term, TTY: true, Next: &Human{W: &term}}
	p.PlayStart("gpu", []string{"a", "b"})
	p.TaskStart("sysctl", true)
	p.Result(&TaskResult{Host: "a", Status: OK})
	s := screen(t, term.Bytes())
	if s[len(s)-1] != "HANDLER [sysctl]: 1/2 hosts" || s[len(s)-2] != "ok: [a]" {
		t.Errorf("mid-task screen:\n%s", strings.Join(s, "\n"))
	}
}

func TestProgressConcurrentResults(t *testing.T) {
	var term bytes.Buffer
	var hosts []string
	for i := range 40 {
		hosts = append(hosts, fmt.Sprintf("h%02d", i))
	}
	p := &Progress{W: &term, TTY: true, Next: &Human{W: &term}}
	p.PlayStart("fleet", hosts)
	p.TaskStart("converge", false)
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Go(func() { p.Result(&TaskResult{Host: h, Status: Changed}) })
	}
	wg.Wait()
	okLine := regexp.MustCompile(`^changed: \[h\d\d\]$`)
	n := 0
	for _, l := range screen(t, term.Bytes()) {
		switch {
		case okLine.MatchString(l):
			n++
		case l == "", l == "PLAY [fleet] (40 hosts)", l == "TASK [converge]":
		default:
			t.Errorf("garbled line %q", l)
		}
	}
	if n != len(hosts) {
		t.Errorf("%d host lines on screen, want %d", n, len(hosts))
	}
}

func TestProgressTaskHostsAndLongNames(t *testing.T) {
	var stderr bytes.Buffer
	p := &Progress{W: &stderr, TTY: true}
	p.PlayStart("p", []string{"a", "b", "c", "d", "e"})
	name := strings.Repeat("configure the NVIDIA container runtime ", 4)
	p.TaskStart(name, false)
	// A serial batch of 2: the runner says so (here through Tee) and the
	// line follows it.
	Tee(nil, p).(TaskSizer).TaskHosts(2)
	p.Result(&TaskResult{Host: "a", Status: Unreachable})
	s := screen(t, stderr.Bytes())
	line := s[len(s)-1]
	if !strings.HasSuffix(line, ": 1/2 hosts") {
		t.Errorf("line %q does not count against the batch", line)
	}
	if n := utf8.RuneCountInString(line); n >= 80 {
		t.Errorf("line is %d columns, it would wrap on an 80-column terminal: %q", n, line)
	}
	p.Result(&TaskResult{Host: "b", Status: OK})
	// Without TaskHosts the next task counts the play's hosts minus the
	// one that became unreachable.
	p.TaskStart("next", false)
	if s := screen(t, stderr.Bytes()); s[len(s)-1] != "TASK [next]: 0/4 hosts" {
		t.Errorf("line %q, want 0/4 after one host dropped out", s[len(s)-1])
	}
}

// brokenWriter fails every write, like a terminal that went away.
type brokenWriter struct{ n int }

func (w *brokenWriter) Write(b []byte) (int, error) {
	w.n++
	return 0, os.ErrClosed
}

func TestProgressStopsDrawingOnWriteError(t *testing.T) {
	w := &brokenWriter{}
	var stdout bytes.Buffer
	play(&Progress{W: w, TTY: true, Next: &Human{W: &stdout}})
	if w.n != 1 {
		t.Errorf("%d writes to a broken terminal, want 1 then silence", w.n)
	}
	if !strings.Contains(stdout.String(), "RECAP") {
		t.Errorf("the run's output stopped with the progress line:\n%s", stdout.String())
	}
}

func TestQuietPrintsOnlyFailuresAndRecap(t *testing.T) {
	var out bytes.Buffer
	r := play(&Quiet{Next: &Human{W: &out}})
	r.AddError("play \"gpu\": stopping")
	got := out.String()
	for _, want := range []string{"PLAY [gpu]", "TASK [relocate drop-ins]", "failed: [omen] => main config does not parse", "RECAP", "omen : ok=1 changed=0 unreachable=0 failed=1"} {
		if !strings.Contains(got, want) {
			t.Errorf("quiet output lacks %q:\n%s", want, got)
		}
	}
	for _, banned := range []string{"ok: [", "changed: [", "TASK [install runtime]"} {
		if strings.Contains(got, banned) {
			t.Errorf("quiet output has %q:\n%s", banned, got)
		}
	}
	if controlBytes.MatchString(got) {
		t.Errorf("quiet output has control characters: %q", got)
	}

	// A clean run prints the recap and nothing else.
	out.Reset()
	q := &Quiet{Next: &Human{W: &out}}
	q.PlayStart("gpu", []string{"a"})
	q.TaskStart("t", false)
	clean := NewRun("id", false)
	tr := &TaskResult{Host: "a", Status: OK}
	clean.Add(tr)
	q.Result(tr)
	q.Done(clean)
	if want := "\nRECAP\na : ok=1 changed=0 unreachable=0 failed=0 skipped=0\n"; out.String() != want {
		t.Errorf("quiet clean run printed %q, want %q", out.String(), want)
	}
}

// recorder logs the events it sees.
type recorder struct{ events []string }

func (r *recorder) PlayStart(name string, hosts []string) {
	r.events = append(r.events, fmt.Sprintf("play %s %d", name, len(hosts)))
}
func (r *recorder) TaskStart(name string, handler bool) {
	r.events = append(r.events, fmt.Sprintf("task %s %v", name, handler))
}
func (r *recorder) Result(tr *TaskResult) { r.events = append(r.events, "result "+tr.Host) }
func (r *recorder) Done(*Run)             { r.events = append(r.events, "done") }

func TestTeeForwardsToEach(t *testing.T) {
	a, b := &recorder{}, &recorder{}
	play(Tee(a, nil, b))
	want := "play gpu 3,task install runtime false,result nuc1,result nuc2,result omen,task relocate drop-ins false,result nuc1,result nuc2,result omen,done"
	for i, r := range []*recorder{a, b} {
		if got := strings.Join(r.events, ","); got != want {
			t.Errorf("observer %d saw %s\nwant %s", i, got, want)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if IsTerminal(pw) {
		t.Error("a pipe is not a terminal")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is not a terminal")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if IsTerminal(null) {
		t.Error("/dev/null is a character device but not a terminal")
	}
}
