package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"nodeconverge/engine/redact"
)

// JSONLines is the streaming report (`--report jsonl=FILE`): one JSON
// object per line, written as the run goes, so a fleet's report is never
// held in memory. The first line says which run ({"type":"run"}), then
// one line per host as the host is done ({"type":"host"}, a HostReport
// whose results are shown as in the JSON report), then one closing line
// ({"type":"end"}) with the exit code and the run's errors and notes. The
// lines go to a temporary file beside FILE, renamed over it when the run
// ends, as every report is: a reader never sees half a report, and an
// older report is never lost to a run that could not finish it.
type JSONLines struct {
	view    View
	path    string
	f       *os.File
	started bool
	err     error
	mu      sync.Mutex
}

// CreateJSONLines opens the temporary file the report streams into.
func CreateJSONLines(path string) (*JSONLines, error) { return View{}.CreateJSONLines(path) }

// CreateJSONLines opens the temporary file of a report that shows what v
// adds.
func (v View) CreateJSONLines(path string) (*JSONLines, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".nodeconverge-report-*")
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", path, err)
	}
	return &JSONLines{view: v, path: path, f: f}, nil
}

type jsonlRun struct {
	Type    string    `json:"type"`
	Schema  int       `json:"schema_version"`
	ID      string    `json:"run_id"`
	Check   bool      `json:"check"`
	Started time.Time `json:"started"`
}

type jsonlHost struct {
	Type string `json:"type"`
	*HostReport
}

type jsonlEnd struct {
	Type     string    `json:"type"`
	Finished time.Time `json:"finished"`
	ExitCode int       `json:"exit_code"`
	Hosts    int       `json:"hosts"`
	Errors   []string  `json:"errors,omitempty"`
	Lost     []string  `json:"lost,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
}

// line writes v as one redacted line; the first failure is kept.
func (j *JSONLines) line(v any) {
	if j.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.err = fmt.Errorf("report %s: encode: %w", j.path, err)
		return
	}
	b = append(redact.JSON(b), '\n')
	if _, err := j.f.Write(b); err != nil {
		j.err = fmt.Errorf("report %s: %w", j.path, err)
	}
}

func (j *JSONLines) start(r *Run) {
	if !j.started {
		j.started = true
		j.line(jsonlRun{Type: "run", Schema: SchemaVersion, ID: r.ID, Check: r.Check, Started: r.Started})
	}
}

// Host writes one host's line.
func (j *JSONLines) Host(r *Run, hr *HostReport) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.start(r)
	shown := *hr
	shown.Results = make([]*TaskResult, len(hr.Results))
	for i, tr := range hr.Results {
		shown.Results[i] = j.view.shownResult(tr)
	}
	shown.NotAttempted, shown.Interrupted = redact.Text(hr.NotAttempted), redact.Text(hr.Interrupted)
	j.line(jsonlHost{Type: "host", HostReport: &shown})
}

// Close writes the closing line and puts the report in place; it returns
// the first error any line met.
func (j *JSONLines) Close(r *Run) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.start(r)
	r.mu.Lock()
	end := jsonlEnd{Type: "end", Finished: r.Finished, Hosts: len(r.Hosts), Errors: redactAll(r.Errors), Lost: redactAll(r.Lost), Notes: redactAll(r.Notes)}
	r.mu.Unlock()
	end.ExitCode = r.ExitCode()
	j.line(end)
	return commitTemp(j.f, j.path, j.err)
}

// Abandon removes the temporary file of a run that never started.
func (j *JSONLines) Abandon() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("report %s: %w", j.path, err)
	}
	if err := os.Remove(j.f.Name()); err != nil {
		return fmt.Errorf("report %s: %w", j.path, err)
	}
	return nil
}
