package report

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"nodeconverge/engine/module"
)

// schemaPath is the schema file users validate reports against; the test
// reads the same file, not a copy.
const schemaPath = "../../docs/report-schema.json"

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	abs, err := filepath.Abs(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Formats (date-time) are annotations only unless asserted; the report
	// promises RFC 3339 times, so hold it to that.
	c.AssertFormat()
	s, err := c.Compile(abs)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaPath, err)
	}
	return s
}

// realisticRun is a check run over a small fleet with every status, every
// file action and every optional field set somewhere.
func realisticRun() *Run {
	r := NewRun("20261129T221000Z-1a2b3c", true)
	r.Started = time.Date(2026, 11, 29, 22, 10, 0, 0, time.UTC)
	oldMain := []byte("version = 2\n")
	newMain := []byte("version = 2\n[plugins]\n")
	dropin := []byte("[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"registry.k8s.io/pause:3.6\"\n")
	note := []byte("moved by nodeconverge\n")
	evidence := []module.Evidence{
		{What: "candidate tree loads", Command: "containerd --config <staged>/config.toml config dump", OK: true, Required: true},
		{What: "runtime binary exists", Command: "test -x /usr/bin/nvidia-container-runtime", OK: false, Output: "exit status 1\n", Required: false},
	}
	r.Add(&TaskResult{Play: "GPU containerd runtimes", Task: "gather", Module: "command", Host: "nuc1", Status: OK,
		Plan: &module.Plan{}, Duration: 12 * time.Millisecond})
	r.Add(&TaskResult{Play: "GPU containerd runtimes", Task: "relocate drop-ins", Module: "containerd_dropins", Host: "nuc1", Status: Changed,
		Duration: 412 * time.Millisecond,
		Plan: &module.Plan{
			Files: []module.FileChange{
				{Action: module.Move, From: "/etc/containerd/conf.d/zz.toml", Path: "/etc/containerd/conf.d.disabled/zz.toml",
					Before: dropin, After: dropin, BeforeHash: module.Hash(dropin), AfterHash: module.Hash(dropin), Mode: 0o644,
					Reasons: []string{"shadows /etc/containerd/config.toml: sandbox_image"}},
				{Action: module.Create, Path: "/etc/containerd/conf.d.disabled/zz.toml.nodeconverge", After: note, AfterHash: module.Hash(note), Mode: 0o644},
				{Action: module.Update, Path: "/etc/containerd/config.toml", Before: oldMain, After: newMain,
					BeforeHash: module.Hash(oldMain), AfterHash: module.Hash(newMain), Owner: "root", Group: "root"},
				{Action: module.Delete, Path: "/etc/containerd/conf.d/old.toml", Before: oldMain, BeforeHash: module.Hash(oldMain)},
			},
			Effective: []module.EffectiveChange{
				{Key: `plugins."io.containerd.grpc.v1.cri".sandbox_image`, Before: `"registry.k8s.io/pause:3.6"`, After: `"registry.k8s.io/pause:3.9"`,
					DecidedBy: "containerd's default, put back by /etc/containerd/conf.d/zz.toml"},
				{Key: `plugins."io.containerd.grpc.v1.cri".registry.configs."harbor".auth.password`, After: `"<redacted>"`},
				{Key: `plugins."io.containerd.grpc.v1.cri".enable_cdi`, Before: "false"},
			},
			Restart:  []string{"containerd"},
			Evidence: evidence,
			Notes:    []string{"conf.d.disabled created"},
			Data:     json.RawMessage(`{"moves":[["a","b"]]}`),
		}})
	r.Add(&TaskResult{Play: "GPU containerd runtimes", Task: "restart containerd", Module: "containerd_restart", Host: "nuc1", Handler: true,
		Status: Changed, Because: []string{`"relocate drop-ins" changed /etc/containerd/config.toml`},
		Plan: &module.Plan{Restart: []string{"containerd"}}})
	r.Add(&TaskResult{Play: "GPU containerd runtimes", Task: "run probe", Module: "command", Host: "nuc2", Status: Skipped,
		Msg: "not run in check mode", Plan: &module.Plan{Skip: "not run in check mode", Commands: []string{"nvidia-smi -L"}}})
	r.Add(&TaskResult{Play: "GPU containerd runtimes", Task: "relocate drop-ins", Module: "containerd_dropins", Host: "omen", Status: Failed,
		Msg:  "validation failed: containerd config dump: duplicate key",
		Plan: &module.Plan{Evidence: evidence[:1]}, Duration: time.Second, Refused: true})
	r.Add(&TaskResult{Play: "base", Task: "probe", Module: "command", Host: "omen", Status: Failed,
		Msg: "apply: probe exited 1; rolled back this host's run", RolledBack: []string{"/etc/sysctl.d/99-inotify.conf"}})
	r.Add(&TaskResult{Play: "GPU containerd runtimes", Task: "gather", Module: "command", Host: "omen2", Status: Unreachable,
		Msg: "dial tcp 10.0.0.9:22: connect: no route to host"})
	// An apply-mode result, so the Result shape is covered too.
	r.Add(&TaskResult{Play: "base", Task: "log in to the registry", Module: "command", Host: "nuc2", Status: Changed, NoLog: true,
		Plan: &module.Plan{Commands: []string{"login"}}})
	r.Add(&TaskResult{Play: "base", Task: "sysctl", Module: "sysctl", Host: "nuc2", Status: Changed,
		Result: &module.Result{Changed: true, Msg: "written", Output: "net.ipv4.ip_forward = 1\n",
			Files: []module.FileChange{{Action: module.Create, Path: "/etc/sysctl.d/90-k8s.conf", AfterHash: module.Hash(note), Mode: 0o644}}}})
	r.Touch("idle")
	r.AddError(`play "GPU containerd runtimes": 2 of 4 hosts failed (max_fail_percentage 25): stopping the play`)
	r.AddNote("took over a stale lock on nuc1 from run 20261128T221000Z-ffffff")
	r.Interrupt("nuc2", `handler "restart containerd" in flight at the signal finished: restarted containerd`)
	r.Interrupt("idle", "not started, nothing changed")
	r.SetGroups(map[string][]string{"nuc1": {"gpu", "rack1"}, "omen": {"gpu"}})
	r.Finished = r.Started.Add(3 * time.Second)
	return r
}

func reportJSON(t *testing.T, r *Run) any {
	t.Helper()
	var b bytes.Buffer
	// With the diffs of a --diff run: the widest report.
	if err := (View{Diff: true}).WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(&b)
	if err != nil {
		t.Fatalf("report is not JSON: %v", err)
	}
	return v
}

func TestJSONReportMatchesSchema(t *testing.T) {
	s := compileSchema(t)
	for name, r := range map[string]*Run{
		"realistic": realisticRun(),
		"empty":     NewRun("empty", false),
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Validate(reportJSON(t, r)); err != nil {
				t.Fatalf("report does not validate against %s:\n%v", schemaPath, err)
			}
		})
	}
}

// TestJSONSchemaRejects proves the schema constrains something: each case
// corrupts a valid report in one way and must fail validation.
func TestJSONSchemaRejects(t *testing.T) {
	s := compileSchema(t)
	results := func(v any) []any { return v.(map[string]any)["results"].([]any) }
	field := func(v any, i int, k string) map[string]any { return results(v)[i].(map[string]any)[k].(map[string]any) }
	files := func(v any) []any { return field(v, 1, "plan")["files"].([]any) }
	for _, tc := range []struct {
		name    string
		corrupt func(v any)
		want    string // a fragment of the validation error
	}{
		{"unknown status", func(v any) { results(v)[0].(map[string]any)["status"] = "drifted" }, "status"},
		{"unknown file action", func(v any) { files(v)[0].(map[string]any)["action"] = "rename" }, "action"},
		{"short hash", func(v any) { files(v)[2].(map[string]any)["before_sha256"] = "abc123" }, "before_sha256"},
		{"upper-case hash", func(v any) {
			f := files(v)[2].(map[string]any)
			f["after_sha256"] = strings.ToUpper(f["after_sha256"].(string))
		}, "after_sha256"},
		{"move without from", func(v any) { delete(files(v)[0].(map[string]any), "from") }, "from"},
		{"create with a before hash", func(v any) { files(v)[1].(map[string]any)["before_sha256"] = module.Hash([]byte("x")) }, "files/1"},
		{"undocumented field", func(v any) { results(v)[0].(map[string]any)["contents"] = "password = hunter2" }, "contents"},
		{"missing run id", func(v any) { delete(v.(map[string]any), "run_id") }, "run_id"},
		{"wrong schema version", func(v any) { v.(map[string]any)["schema_version"] = json.Number("2") }, "schema_version"},
		{"undocumented exit code", func(v any) { v.(map[string]any)["exit_code"] = json.Number("3") }, "exit_code"},
		{"bad timestamp", func(v any) { v.(map[string]any)["started"] = "yesterday" }, "started"},
		{"negative recap count", func(v any) {
			v.(map[string]any)["recap"].(map[string]any)["nuc1"].(map[string]any)["ok"] = json.Number("-1")
		}, "ok"},
		{"evidence without ok", func(v any) {
			delete(field(v, 1, "plan")["evidence"].([]any)[0].(map[string]any), "ok")
		}, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := reportJSON(t, realisticRun())
			if err := s.Validate(v); err != nil {
				t.Fatalf("the uncorrupted report must validate: %v", err)
			}
			tc.corrupt(v)
			err := s.Validate(v)
			if err == nil {
				t.Fatalf("schema accepted a report with %s", tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not point at %q:\n%v", tc.want, err)
			}
		})
	}
}
