package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/redact"
)

// Seal hands each host's results out once, in order, and with drop the
// run forgets them but keeps the recap.
func TestSealDropsResultsKeepsRecap(t *testing.T) {
	r := NewRun("id", true)
	for _, tr := range []*TaskResult{
		{Task: "a", Host: "h1", Status: Changed}, {Task: "a", Host: "h2", Status: OK},
		{Task: "b", Host: "h1", Status: OK}, {Task: "b", Host: "h2", Status: Failed},
	} {
		r.Add(tr)
	}
	got := r.Seal([]string{"h1"}, true)
	if len(got) != 1 || got[0].Host != "h1" || len(got[0].Results) != 2 || got[0].Results[0].Task != "a" || got[0].Results[1].Task != "b" {
		t.Fatalf("sealed %+v, want h1 with a then b", got)
	}
	if got[0].Recap.Changed != 1 || got[0].Recap.OK != 1 {
		t.Errorf("h1 recap %+v", got[0].Recap)
	}
	if len(r.Results) != 2 || r.Results[0].Host != "h2" || r.Results[1].Host != "h2" {
		t.Errorf("run kept %v, want h2's two results", r.Results)
	}
	if again := r.Seal([]string{"h1"}, true); again != nil {
		t.Errorf("h1 sealed twice: %+v", again)
	}
	if rc := r.Recap["h1"]; rc.Changed != 1 {
		t.Errorf("recap of h1 lost: %+v", rc)
	}
	if un := r.Unsealed(); !reflect.DeepEqual(un, []string{"h2"}) {
		t.Errorf("unsealed %v, want [h2]", un)
	}
	if r.ExitCode() != ExitFailed {
		t.Errorf("exit code %d, want %d from h2's recap", r.ExitCode(), ExitFailed)
	}
}

// The streamed report: nothing at FILE until the run ends, then a run
// line, one line per host whose results are the JSON report's, and an end
// line; redacted like the JSON report.
func TestJSONLinesStreamsHosts(t *testing.T) {
	const secret = "S3cr3t-jsonl-value"
	redact.AddVars(map[string]any{"api_token": secret})
	path := filepath.Join(t.TempDir(), "run.jsonl")
	j, err := CreateJSONLines(path)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRun("id-1", true)
	r.Add(&TaskResult{Task: "login", Host: "h1", Status: Changed, Msg: "token " + secret,
		Plan: &module.Plan{Commands: []string{"login " + secret}}})
	r.Add(&TaskResult{Task: "login", Host: "h2", Status: OK, NoLog: true, Msg: secret})
	r.AddNote("note " + secret)
	var want bytes.Buffer
	if err := WriteJSON(&want, r); err != nil {
		t.Fatal(err)
	}
	for _, hr := range r.Seal([]string{"h1", "h2"}, true) {
		j.Host(r, hr)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("report at %s before the run ended: %v", path, err)
	}
	if err := j.Close(r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("streamed report shows the secret:\n%s", b)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", len(lines)+1, err, sc.Text())
		}
		lines = append(lines, m)
	}
	var types []any
	for _, l := range lines {
		types = append(types, l["type"])
	}
	if !reflect.DeepEqual(types, []any{"run", "host", "host", "end"}) {
		t.Fatalf("line types %v, want run, host, host, end", types)
	}
	if lines[0]["run_id"] != "id-1" || lines[3]["exit_code"] != float64(ExitDrift) || lines[3]["hosts"] != float64(2) {
		t.Errorf("run line %v, end line %v", lines[0], lines[3])
	}
	// Each host line's results are the JSON report's results of that host.
	var doc map[string]any
	if err := json.Unmarshal(want.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	byHost := map[string][]any{}
	for _, res := range doc["results"].([]any) {
		h := res.(map[string]any)["host"].(string)
		byHost[h] = append(byHost[h], res)
	}
	for _, l := range lines[1:3] {
		h := l["host"].(string)
		if !reflect.DeepEqual(l["results"], byHost[h]) {
			t.Errorf("%s: streamed results %v\nJSON report's %v", h, l["results"], byHost[h])
		}
	}
	left, err := filepath.Glob(filepath.Join(filepath.Dir(path), ".nodeconverge-report-*"))
	if err != nil || len(left) != 0 {
		t.Errorf("temporary files left: %v (%v)", left, err)
	}
}

// A stream whose run never started leaves nothing behind.
func TestJSONLinesAbandon(t *testing.T) {
	dir := t.TempDir()
	j, err := CreateJSONLines(filepath.Join(dir, "run.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Abandon(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("left %v (%v)", ents, err)
	}
}
