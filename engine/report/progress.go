package report

import (
	"fmt"
	"io"
	"os"
	"sync"

	"nodeconverge/engine/safetext"
)

// TaskSizer is an optional Observer extension: a runner that knows how many
// hosts a task runs on (the current serial batch, minus hosts already out,
// or the hosts a handler was notified on) calls TaskHosts right after
// TaskStart. Without it Progress counts against the play's hosts.
type TaskSizer interface {
	TaskHosts(n int)
}

// Progress draws a live "TASK [name]: done/total hosts" line on W (stderr)
// while a task runs, and passes every event on to Next (the human output).
// It wraps Next rather than sitting beside it because the line has to be
// erased before Next prints and drawn again after, or the two garble each
// other on a shared terminal.
//
// When TTY is false Progress writes nothing at all to W, so a pipe, a log
// file or the journal never receives a carriage return or an escape
// sequence.
type Progress struct {
	W    io.Writer
	TTY  bool
	Next Observer

	mu        sync.Mutex
	playHosts int
	out       map[string]bool // failed or unreachable: the runner skips them for the rest of the play
	task      string
	handler   bool
	total     int
	done      int
	drawn     bool
	broken    bool // a write to W failed; stop drawing rather than fail the run
}

// maxTaskName keeps the line shorter than a default 80-column terminal: a
// line that wraps cannot be redrawn with a carriage return.
const maxTaskName = 50

// PlayStart erases the line, passes the event on and starts counting hosts
// of the new play.
func (p *Progress) PlayStart(name string, hosts []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	p.playHosts = len(hosts)
	p.out = map[string]bool{}
	p.task = ""
	if p.Next != nil {
		p.Next.PlayStart(name, hosts)
	}
}

// TaskStart passes the header on and draws the line at 0 hosts done.
func (p *Progress) TaskStart(name string, handler bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	if p.Next != nil {
		p.Next.TaskStart(name, handler)
	}
	p.task, p.handler, p.done = name, handler, 0
	p.total = p.playHosts - len(p.out)
	p.draw()
}

// TaskHosts sets the number of hosts the running task works on.
func (p *Progress) TaskHosts(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ts, ok := p.Next.(TaskSizer); ok {
		ts.TaskHosts(n)
	}
	p.total = n
	p.draw()
}

// Result erases the line, lets Next print the host's outcome, and redraws
// with one more host done; the line disappears when the task is complete.
func (p *Progress) Result(tr *TaskResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	if p.Next != nil {
		p.Next.Result(tr)
	}
	if tr.Status == Failed || tr.Status == Unreachable {
		if p.out == nil {
			p.out = map[string]bool{}
		}
		p.out[tr.Host] = true
	}
	p.done++
	if p.done > p.total {
		// Without TaskHosts the total is a guess from the play's
		// hosts; never show 6/5.
		p.total = p.done
	}
	if p.done < p.total {
		p.draw()
	}
}

// Done erases the line for good and passes the end of the run on.
func (p *Progress) Done(r *Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	p.task = ""
	if p.Next != nil {
		p.Next.Done(r)
	}
}

func (p *Progress) draw() {
	if !p.TTY || p.broken || p.task == "" {
		return
	}
	kind := "TASK"
	if p.handler {
		kind = "HANDLER"
	}
	name := []rune(safetext.Line(p.task))
	if len(name) > maxTaskName {
		name = append(name[:maxTaskName-1], '…')
	}
	// \r returns to column 0 and ESC[K erases what a longer previous
	// line left behind.
	p.write(fmt.Sprintf("\r\x1b[K%s [%s]: %d/%d hosts", kind, string(name), p.done, p.total))
	p.drawn = !p.broken
}

func (p *Progress) clear() {
	if !p.drawn || p.broken {
		return
	}
	p.write("\r\x1b[K")
	p.drawn = false
}

func (p *Progress) write(s string) {
	if _, err := io.WriteString(p.W, s); err != nil {
		// The line is decoration: a closed terminal must not stop or
		// fail a run that is changing nodes.
		p.broken = true
	}
}

// Quiet passes on only what someone has to act on: failed and unreachable
// results, each under its play and task header, and the end of the run
// (notes, run errors, recap). It is what --quiet prints; a cron job with
// --quiet mails nothing but trouble and the recap. Next must be set.
type Quiet struct {
	Next Observer

	mu        sync.Mutex
	play      string
	hosts     []string
	playShown bool
	task      string
	handler   bool
	taskShown bool
}

// PlayStart remembers the play; its header is printed only above a failure.
func (q *Quiet) PlayStart(name string, hosts []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.play, q.hosts, q.playShown, q.task, q.taskShown = name, hosts, false, "", false
}

// TaskStart remembers the task; its header is printed only above a failure.
func (q *Quiet) TaskStart(name string, handler bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.task, q.handler, q.taskShown = name, handler, false
}

// Result passes on failed and unreachable results, with the headers that
// give them context.
func (q *Quiet) Result(tr *TaskResult) {
	if tr.Status != Failed && tr.Status != Unreachable {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.playShown {
		q.Next.PlayStart(q.play, q.hosts)
		q.playShown = true
	}
	if !q.taskShown {
		q.Next.TaskStart(q.task, q.handler)
		q.taskShown = true
	}
	q.Next.Result(tr)
}

// Done passes the end of the run on whole.
func (q *Quiet) Done(r *Run) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.Next.Done(r)
}

// Tee returns an Observer that passes every event to each of obs in order
// (nil entries are ignored), for a run watched by more than one consumer.
func Tee(obs ...Observer) Observer {
	var t tee
	for _, o := range obs {
		if o != nil {
			t = append(t, o)
		}
	}
	return t
}

type tee []Observer

func (t tee) PlayStart(name string, hosts []string) {
	for _, o := range t {
		o.PlayStart(name, hosts)
	}
}

func (t tee) TaskStart(name string, handler bool) {
	for _, o := range t {
		o.TaskStart(name, handler)
	}
}

func (t tee) TaskHosts(n int) {
	for _, o := range t {
		if ts, ok := o.(TaskSizer); ok {
			ts.TaskHosts(n)
		}
	}
}

func (t tee) Result(tr *TaskResult) {
	for _, o := range t {
		o.Result(tr)
	}
}

func (t tee) Done(r *Run) {
	for _, o := range t {
		o.Done(r)
	}
}

// IsTerminal reports whether w is an interactive terminal that can take a
// redrawn progress line: a character device that is not /dev/null, with a
// TERM that is not "dumb" (Emacs shells, some CI consoles). It checks the
// file mode instead of calling isatty so it needs no platform code.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}
