package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"nodeconverge/engine/redact"
	"nodeconverge/engine/safetext"
)

// SchemaVersion is the version of the JSON report's schema
// (docs/report-schema.json). It changes when a field changes meaning.
const SchemaVersion = 1

// jsonRun is the on-disk shape of a Run: the Run itself plus the schema
// version and the exit code, so a nightly job can read one file.
type jsonRun struct {
	Schema   int `json:"schema_version"`
	ExitCode int `json:"exit_code"`
	*Run     `json:""`
}

// WriteJSON writes the run as the versioned JSON report. File contents are
// never in it (only their hashes); effective-config values under
// credential keys are already redacted by the modules; a no_log task
// carries its status only (TaskResult.Shown); messages and outputs are
// redacted as the human output is, and the values of secret-named
// variables are masked in every string.
func WriteJSON(w io.Writer, r *Run) error { return View{}.WriteJSON(w, r) }

// View says what a report shows beyond what every report shows. The JSON,
// JSON Lines and HTML reports of one run with one View carry the same data.
type View struct {
	// Diff adds each result's diff (TaskResult.Diff): the run was made
	// with --diff, and its reports show what the human output showed.
	Diff bool
	// CompressAbove overrides the HTML page's CompressAbove (tests).
	CompressAbove int
}

// WriteJSON writes the run as the versioned JSON report (see the package
// function WriteJSON), with what v adds.
func (v View) WriteJSON(w io.Writer, r *Run) error {
	b, err := v.encode(r, "  ")
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// encode is the JSON report's bytes, redacted: what WriteJSON writes and
// what the HTML report embeds.
func (v View) encode(r *Run, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", indent)
	if err := enc.Encode(jsonRun{Schema: SchemaVersion, ExitCode: r.ExitCode(), Run: r.shown(v)}); err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return redact.JSON(b.Bytes()), nil
}

// shown is the run as the JSON report shows it: a copy (the saved plan is
// made from the run itself) with every result as Shown and free text
// redacted.
func (r *Run) shown(v View) *Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &Run{ID: r.ID, Check: r.Check, Started: r.Started, Finished: r.Finished, Recap: r.Recap, Hosts: r.Hosts,
		NotAttempted: map[string]string{}, Groups: r.Groups, Interrupted: map[string]string{}}
	for _, tr := range r.Results {
		c.Results = append(c.Results, v.shownResult(tr))
	}
	for h, st := range r.Interrupted {
		c.Interrupted[h] = redact.Text(st)
	}
	if len(c.Interrupted) == 0 {
		c.Interrupted = nil
	}
	c.Errors, c.Lost, c.Notes = redactAll(r.Errors), redactAll(r.Lost), redactAll(r.Notes)
	for h, why := range r.NotAttempted {
		c.NotAttempted[h] = redact.Text(why)
	}
	if len(c.NotAttempted) == 0 {
		c.NotAttempted = nil
	}
	return c
}

// redactAll is each of in redacted as text, for the run's free-text lists.
func redactAll(in []string) []string {
	var out []string
	for _, s := range in {
		out = append(out, redact.Text(s))
	}
	return out
}

// shownResult is tr as the JSON report shows it: Shown, with its message,
// output, notes and validation output redacted as text, and with v.Diff
// its diff as the human output's --diff prints it.
func (v View) shownResult(tr *TaskResult) *TaskResult {
	if tr.NoLog {
		return tr.Shown()
	}
	c := *tr
	c.Msg = redact.Text(tr.Msg)
	if v.Diff && tr.Plan != nil && tr.Status != Skipped {
		c.Diff = PlanDiff(tr.Host, tr.Plan)
	}
	if tr.Plan != nil {
		p := *tr.Plan
		p.Skip = redact.Text(p.Skip)
		p.Notes, p.Drift = nil, nil
		for _, n := range tr.Plan.Notes {
			p.Notes = append(p.Notes, redact.Text(n))
		}
		for _, n := range tr.Plan.Drift {
			p.Drift = append(p.Drift, redact.Text(n))
		}
		p.Evidence = nil
		for _, e := range tr.Plan.Evidence {
			e.Output = redact.Text(e.Output)
			p.Evidence = append(p.Evidence, e)
		}
		c.Plan = &p
	}
	if tr.Result != nil {
		res := *tr.Result
		res.Msg, res.Output = redact.Text(res.Msg), redact.Text(res.Output)
		c.Result = &res
	}
	c.Proofs = nil
	for _, p := range tr.Proofs {
		p.Reason, p.Detail, p.Output = redact.Text(p.Reason), redact.Text(p.Detail), redact.Text(p.Output)
		c.Proofs = append(c.Proofs, p)
	}
	return &c
}

// WriteProm writes a Prometheus textfile for node_exporter's textfile
// collector: per host drift, failure, unreachability and, when the host is
// in sync, the time of this success.
func WriteProm(w io.Writer, r *Run) error { return WritePromSince(w, r, nil) }

// PreviousSuccess reads the last-success timestamps of an earlier textfile
// (a missing or unreadable file gives none), so a host that keeps drifting
// keeps its old timestamp and the series ages instead of vanishing: that
// is what makes `time() - nodeconverge_last_success_timestamp_seconds`
// alert on a node that has not been in sync for a day.
func PreviousSuccess(path string) map[string]int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, `nodeconverge_last_success_timestamp_seconds{host="`)
		if !ok {
			continue
		}
		host, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		var ts int64
		if _, err := fmt.Sscan(val, &ts); err == nil {
			out[host] = ts
		}
	}
	return out
}

// WritePromSince is WriteProm carrying forward the previous last-success
// timestamps of hosts that are not in sync now.
func WritePromSince(w io.Writer, r *Run, previous map[string]int64) error {
	var b strings.Builder
	b.WriteString("# HELP nodeconverge_drift 1 when the host has pending changes (check mode) or was changed (apply).\n# TYPE nodeconverge_drift gauge\n")
	hosts := r.SortedHosts()
	sort.Strings(hosts)
	for _, h := range hosts {
		fmt.Fprintf(&b, "nodeconverge_drift{host=%s} %d\n", promLabel(h), b2i(r.Recap[h].Changed > 0))
	}
	b.WriteString("# HELP nodeconverge_failed 1 when a task failed on the host.\n# TYPE nodeconverge_failed gauge\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "nodeconverge_failed{host=%s} %d\n", promLabel(h), b2i(r.Recap[h].Failed > 0))
	}
	b.WriteString("# HELP nodeconverge_unreachable 1 when the host could not be reached.\n# TYPE nodeconverge_unreachable gauge\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "nodeconverge_unreachable{host=%s} %d\n", promLabel(h), b2i(r.Recap[h].Unreachable > 0))
	}
	b.WriteString("# HELP nodeconverge_last_success_timestamp_seconds End of the last run in which the host had no failure and no drift.\n# TYPE nodeconverge_last_success_timestamp_seconds gauge\n")
	for _, h := range hosts {
		rc := r.Recap[h]
		switch {
		case rc.Failed == 0 && rc.Unreachable == 0 && (rc.Changed == 0 || !r.Check):
			fmt.Fprintf(&b, "nodeconverge_last_success_timestamp_seconds{host=%s} %d\n", promLabel(h), r.Finished.Unix())
		case previous[h] > 0:
			fmt.Fprintf(&b, "nodeconverge_last_success_timestamp_seconds{host=%s} %d\n", promLabel(h), previous[h])
		}
	}
	writeProofs(&b, r, hosts)
	fmt.Fprintf(&b, "# HELP nodeconverge_run_exit_code Exit code of the last run.\n# TYPE nodeconverge_run_exit_code gauge\nnodeconverge_run_exit_code %d\n", r.ExitCode())
	_, err := io.WriteString(w, b.String())
	return err
}

// writeProofs adds each host's proofs by pod: one series per runtime
// handler (and for the daemon or a workload) whose status label says the
// outcome, and the time each took.
func writeProofs(b *strings.Builder, r *Run, hosts []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.Proofs) == 0 {
		return
	}
	b.WriteString("# HELP nodeconverge_runtime_proof 1 for the outcome (status: proved, failed, unproven, skipped) of the run's proof of a runtime handler (kind runtime), of the daemon as a whole (kind daemon) or of a workload, on the host.\n# TYPE nodeconverge_runtime_proof gauge\n")
	for _, h := range hosts {
		for _, p := range r.Proofs[h] {
			fmt.Fprintf(b, "nodeconverge_runtime_proof{host=%s,kind=%s,runtime=%s,status=%s} 1\n", promLabel(h), promLabel(p.Kind), promLabel(p.Name), promLabel(string(p.Status)))
		}
	}
	b.WriteString("# HELP nodeconverge_runtime_proof_seconds How long the proof of a runtime handler took (a pod sandbox started, READY, stopped and removed).\n# TYPE nodeconverge_runtime_proof_seconds gauge\n")
	for _, h := range hosts {
		for _, p := range r.Proofs[h] {
			if p.Kind == "runtime" {
				fmt.Fprintf(b, "nodeconverge_runtime_proof_seconds{host=%s,runtime=%s} %.3f\n", promLabel(h), promLabel(p.Name), p.Duration.Seconds())
			}
		}
	}
}

// promLabel is a label value as the Prometheus text format writes one: in
// double quotes, with backslash, double quote and newline escaped (the
// only escapes it knows: Go's %q wrote \x1b, which makes node_exporter
// refuse the whole file). A control character (a runtime's name is a
// node's text) is first shown as a visible escape (safetext.Line), so the
// file stays valid and holds no raw control byte.
func promLabel(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(safetext.Line(s)) + `"`
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteFileAtomic writes a report next to its final name and renames it, so
// node_exporter or a nightly job never reads half a file.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".nodeconverge-report-*")
	if err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := write(f); err != nil {
		return commitTemp(f, path, fmt.Errorf("report %s: %w", path, err))
	}
	return commitTemp(f, path, nil)
}

// commitTemp ends a report written into the temporary file f: after a
// failure (failed non-nil) it removes f and returns failed; otherwise it
// makes f readable, closes it and renames it over path. Every report, whole
// or streamed, is put in place here, so none is ever seen half written.
func commitTemp(f *os.File, path string, failed error) error {
	if failed == nil {
		if err := f.Chmod(0o644); err != nil {
			failed = fmt.Errorf("report %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil && failed == nil {
		failed = fmt.Errorf("report %s: %w", path, err)
	}
	if failed != nil {
		if err := os.Remove(f.Name()); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("%w (and removing %s: %v)", failed, f.Name(), err)
		}
		return failed
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	return nil
}
