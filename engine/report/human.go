package report

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/pmezard/go-difflib/difflib"

	"nodeconverge/engine/module"
	"nodeconverge/engine/redact"
	"nodeconverge/engine/safetext"
)

// Observer receives a run as it happens. The runner calls it from several
// goroutines; implementations serialise themselves.
type Observer interface {
	PlayStart(name string, hosts []string)
	TaskStart(name string, handler bool)
	Result(tr *TaskResult)
	Done(r *Run)
}

// Human writes Ansible-like text: a header per task, a line per host, diffs
// when asked, and a recap.
type Human struct {
	W    io.Writer
	Diff bool
	// Verbose also prints plan notes and validation evidence.
	Verbose bool
	mu      sync.Mutex
}

// PlayStart prints the play header.
func (h *Human) PlayStart(name string, hosts []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(h.W, "\nPLAY [%s] (%d hosts)\n", safetext.Line(redact.Values(name)), len(hosts))
}

// TaskStart prints the task header.
func (h *Human) TaskStart(name string, handler bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kind := "TASK"
	if handler {
		kind = "HANDLER"
	}
	fmt.Fprintf(h.W, "\n%s [%s]\n", kind, safetext.Line(redact.Values(name)))
}

// Result prints one host's outcome of the current task. A no_log task
// shows its status only; everything printed has credentials redacted.
func (h *Human) Result(tr *TaskResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hidden := tr.NoLog && tr.Plan != nil && len(tr.Plan.Files) > 0 && tr.Status != Skipped
	tr = tr.Shown()
	var b strings.Builder
	// Everything after the status and the host is the node's or the
	// inventory's text: one line each (safetext.Line), or indented under
	// the status line (safetext.Indent), so no value can start a line that
	// reads as another host's status.
	fmt.Fprintf(&b, "%s: [%s]", tr.Status, safetext.Name(tr.Host))
	if tr.Plan != nil && (tr.Status == Changed || tr.Status == Failed) {
		for _, f := range tr.Plan.Files {
			fmt.Fprintf(&b, " %s %s", f.Action, safetext.Line(f.Path))
			if f.Action == module.Move {
				fmt.Fprintf(&b, " (from %s)", safetext.Line(f.From))
			}
		}
		for _, c := range tr.Plan.Commands {
			fmt.Fprintf(&b, " run %q", c)
		}
	}
	if len(tr.Because) > 0 {
		fmt.Fprintf(&b, " (because %s)", safetext.Line(strings.Join(tr.Because, ", ")))
	}
	msg := tr.Msg
	if msg == "" && tr.Result != nil {
		msg = tr.Result.Msg
	}
	if msg != "" {
		msg := redact.Text(strings.TrimRight(msg, "\n"))
		if strings.Contains(msg, "\n") {
			fmt.Fprintf(&b, "\n    %s", safetext.Indent(msg, "    "))
		} else {
			msg = safetext.Line(msg)
			fmt.Fprintf(&b, " => %s", msg)
		}
	}
	// A failed task's output is shown without -v: it is why it failed
	// (unless the message already carries it).
	if tr.Result != nil && tr.Result.Output != "" && (h.Verbose || tr.Status == Failed && !strings.Contains(tr.Msg, tr.Result.Output)) {
		fmt.Fprintf(&b, "\n    %s", safetext.Indent(redact.Text(tr.Result.Output), "    "))
	}
	b.WriteString("\n")
	for _, p := range tr.Proofs {
		// What did not prove is said line by line, with the daemon's
		// words; what did is in the message's summary.
		if p.Status != module.ProofProved {
			fmt.Fprintf(&b, "    proof: %s\n", safetext.Line(redact.Text(ProofLine(p))))
		}
	}
	if tr.Plan != nil && (tr.Status == Changed || tr.Status == Failed) {
		for _, d := range tr.Plan.Drift {
			fmt.Fprintf(&b, "    drift: %s\n", safetext.Line(redact.Text(d)))
		}
	}
	if tr.Plan != nil && h.Verbose {
		for _, n := range tr.Plan.Notes {
			fmt.Fprintf(&b, "    note: %s\n", safetext.Line(redact.Text(n)))
		}
		for _, e := range tr.Plan.Evidence {
			fmt.Fprintf(&b, "    evidence: %s: %s (ok=%v)\n", safetext.Line(e.What), safetext.Line(e.Command), e.OK)
		}
	}
	if h.Diff && tr.Plan != nil && tr.Status != Skipped {
		b.WriteString(planDiff(tr.Host, tr.Plan, true))
	}
	if h.Diff && hidden {
		b.WriteString("    (diff hidden: no_log: true)\n")
	}
	// Last, the values of secret-named variables, wherever they ended
	// up (a command line, a path, a message); Block once more, so that no
	// field this function forgot can put a raw control byte on the stream.
	io.WriteString(h.W, safetext.Block(redact.Values(b.String())))
}

// ProofLine is one proof in words: "runtime nvidia failed: ...".
func ProofLine(p module.Proof) string {
	what := p.Kind
	if p.Name != "" {
		what += " " + p.Name
	}
	s := fmt.Sprintf("%s %s", what, strings.ToUpper(string(p.Status)))
	if p.Status == module.ProofProved {
		s = fmt.Sprintf("%s proved in %s", what, p.Duration.Round(10*time.Millisecond))
	}
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

// ProofSummary is a host's proofs on one line: each proved runtime with
// its time, then each other outcome with its reason.
func ProofSummary(ps []module.Proof) string {
	var proved, other []string
	for _, p := range ps {
		if p.Status == module.ProofProved {
			proved = append(proved, fmt.Sprintf("%s %s", p.Name, p.Duration.Round(10*time.Millisecond)))
		} else {
			other = append(other, ProofLine(p))
		}
	}
	var parts []string
	if len(proved) > 0 {
		parts = append(parts, "proved (pod sandbox READY, removed): "+strings.Join(proved, ", "))
	}
	if len(other) > 0 {
		parts = append(parts, strings.Join(other, "; "))
	}
	if len(parts) == 0 {
		return "nothing to prove"
	}
	return strings.Join(parts, "; ")
}

// PlanDiff renders a plan's file changes as unified diffs and its effective
// changes as key lines, with the files' bytes exact (for the JSON and HTML
// reports, which escape for themselves); the human output prints the same
// made safe for a terminal.
func PlanDiff(host string, p *module.Plan) string { return planDiff(host, p, false) }

// planDiff is PlanDiff; with safe, names and values are kept on their line
// (safetext.Line) and file text shows control characters as escapes
// (safetext.Block).
func planDiff(host string, p *module.Plan, safe bool) string {
	line, block := func(s string) string { return s }, func(s string) string { return s }
	if safe {
		line, block = safetext.Line, safetext.Block
	}
	host = line(host)
	var b strings.Builder
	for _, f := range p.Files {
		if f.Action == module.Move {
			fmt.Fprintf(&b, "--- %s:%s\n+++ %s:%s\n(moved, content unchanged)\n", host, line(f.From), host, line(f.Path))
			continue
		}
		from, to := host+":"+line(f.Path), host+":"+line(f.Path)
		if f.Action == module.Create {
			from = "/dev/null"
		}
		if f.Action == module.Delete {
			to = "/dev/null"
		}
		ud := difflib.UnifiedDiff{
			A: difflib.SplitLines(redact.Content(f.Path, f.Before)), B: difflib.SplitLines(redact.Content(f.Path, f.After)),
			FromFile: from, ToFile: to, Context: 3,
		}
		text, err := difflib.GetUnifiedDiffString(ud)
		if err != nil {
			fmt.Fprintf(&b, "(diff of %s failed: %s)\n", line(f.Path), line(err.Error()))
			continue
		}
		if text == "" && string(f.Before) != string(f.After) {
			text = fmt.Sprintf("--- %s\n+++ %s\n(only redacted credential values differ)\n", from, to)
		}
		b.WriteString(block(redact.Values(text)))
		if text != "" && !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
		for _, r := range f.Reasons {
			if r != "content" {
				fmt.Fprintf(&b, "    %s: %s\n", line(f.Path), line(r))
			}
		}
	}
	if len(p.Effective) > 0 {
		// The heading only over lines: a plan whose effective changes are
		// all zero-valued fields of new tables says so in one line.
		var lines []string
		zero := 0
		for _, e := range p.Effective {
			switch {
			case e.Before == "" && e.ZeroAfter():
				// A new table brings every field at its zero value;
				// listing them hides the lines that matter.
				zero++
			case e.Before == "":
				lines = append(lines, fmt.Sprintf("  + %s = %s", line(e.Key), line(e.After)))
			case e.After == "":
				lines = append(lines, fmt.Sprintf("  - %s = %s", line(e.Key), line(e.Before)))
			default:
				lines = append(lines, fmt.Sprintf("  ~ %s = %s -> %s", line(e.Key), line(e.Before), line(e.After)))
			}
		}
		switch {
		case len(lines) > 0:
			fmt.Fprintf(&b, "effective config (%s, as the node's containerd loads it):\n%s\n", host, redact.Values(strings.Join(lines, "\n")))
			if zero > 0 {
				fmt.Fprintf(&b, "  (+ %d more new keys at their zero value)\n", zero)
			}
		case zero > 0:
			fmt.Fprintf(&b, "effective config (%s): %d new keys, all at their zero value\n", host, zero)
		}
	}
	return b.String()
}

// Done prints the recap.
func (h *Human) Done(r *Run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNOTE: %s\n", safetext.Indent(redact.Values(redact.Text(n)), "  "))
	}
	for _, e := range r.Lost {
		fmt.Fprintf(&b, "\nERROR: %s\n", safetext.Indent(redact.Values(redact.Text(e)), "  "))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "\nERROR: %s\n", safetext.Indent(redact.Values(redact.Text(e)), "  "))
	}
	fmt.Fprintf(&b, "\nRECAP%s\n", map[bool]string{true: " (check mode: nothing was changed)", false: ""}[r.Check])
	width := 0
	hosts := r.SortedHosts()
	for _, host := range hosts {
		width = max(width, len(safetext.Name(host)))
	}
	for _, host := range hosts {
		rc := r.Recap[host]
		fmt.Fprintf(&b, "%-*s : ok=%d changed=%d unreachable=%d failed=%d skipped=%d",
			width, safetext.Name(host), rc.OK, rc.Changed, rc.Unreachable, rc.Failed, rc.Skipped)
		if rc.Rescued > 0 {
			fmt.Fprintf(&b, " rescued=%d", rc.Rescued)
		}
		if rc.Ignored > 0 {
			fmt.Fprintf(&b, " ignored=%d", rc.Ignored)
		}
		if why, ok := r.NotAttempted[host]; ok {
			fmt.Fprintf(&b, "  not attempted: %s", safetext.Line(redact.Values(redact.Text(why))))
		}
		if st, ok := r.Interrupted[host]; ok {
			fmt.Fprintf(&b, "  interrupted: %s", safetext.Line(redact.Values(redact.Text(st))))
		}
		b.WriteString("\n")
	}
	io.WriteString(h.W, safetext.Block(b.String()))
}
