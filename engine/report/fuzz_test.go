package report

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"nodeconverge/engine/module"
	"nodeconverge/engine/redact"
	"nodeconverge/engine/safetext"
)

// statusLine is how a consumer of the human output (a log scanner, a
// person) reads a host's status line, and recapLine a recap line after the
// last RECAP header (as e2e's parseRecap and Ansible's consumers do).
var (
	statusLine = regexp.MustCompile(`^(ok|changed|failed|skipped|unreachable|fatal): \[`)
	recapLine  = regexp.MustCompile(`^\S.* : ok=[0-9]+ changed=[0-9]+ unreachable=[0-9]+ failed=[0-9]+ skipped=[0-9]+`)
)

// FuzzHumanAndReports (issue 29): arbitrary bytes as a host name, a
// variable's value in a path and a message, a node file's content before
// and after, and a command's output. Whatever they are:
//   - no raw control byte (nor a bidi or zero-width character, nor bytes
//     that are not UTF-8) reaches the terminal stream, in the full, the
//     --quiet and the progress-wrapped output;
//   - no line reads as another host's status line or recap line: exactly
//     one status line per result, for its own host, and after the RECAP
//     header exactly one recap line per host, each its own;
//   - the JSON report is valid and holds the host name, message and
//     command output exactly (where redaction leaves them as they are and
//     they are UTF-8, which is all JSON can carry).
func FuzzHumanAndReports(f *testing.F) {
	f.Add("evil\nnuc2 : ok=3 changed=0 unreachable=0 failed=0 skipped=0\nNOTE: all good", "a\nok: [victim] => {}", []byte("a = 1 # \x00 \x1b]0;pwned\x07\x1b[2J\n"), []byte("a = 2\r\nok: [victim]\n"), "tool \x1b[31m says\nchanged: [victim]\n\x9b2J", "line\nRECAP\nvictim : ok=9 changed=0 unreachable=0 failed=0 skipped=0")
	f.Add(" ", "0", []byte("0"), []byte("0"), "0", "0")
	f.Add(" nuc1\t", "0", []byte("0"), []byte("0"), "0", "0")
	f.Add("nuc1", "harbor.lab", []byte("x\n"), []byte("y\n"), "", "")
	f.Add("\u202egnp.exe", "\xff\xfe/../..", []byte{0xff, 0, '\n'}, []byte("\u2028\ufeff"), "\r\x1b[K", "\x00")
	f.Fuzz(func(t *testing.T, host, value string, before, after []byte, output, msg string) {
		if host == "" || host == "victim" {
			return
		}
		r := NewRun("fuzz", false)
		changed := &TaskResult{Play: "p " + value, Task: "t " + value, Module: "copy", Host: host, Status: Changed, Msg: msg,
			Plan: &module.Plan{
				Files:     []module.FileChange{{Action: module.Update, Path: "/etc/containerd/" + value, Before: before, After: after, Reasons: []string{"mode " + value}}},
				Commands:  []string{"echo " + value},
				Effective: []module.EffectiveChange{{Key: "k." + value, Before: string(before), After: string(after)}},
				Notes:     []string{value}, Drift: []string{value},
			},
			Result:  &module.Result{Changed: true, Output: output},
			Because: []string{value},
		}
		ok := &TaskResult{Play: "p", Task: "t " + value, Module: "copy", Host: "victim", Status: OK, Msg: value}
		failed := &TaskResult{Play: "p", Task: "t2", Module: "shell", Host: host, Status: Failed, Msg: output, Result: &module.Result{Output: output}}
		r.Add(changed)
		r.Add(ok)
		r.Add(failed)
		r.AddNote(value)
		r.AddError(msg)
		r.NotAttempt("victim", value)

		var full, quiet, prog bytes.Buffer
		for _, o := range []Observer{
			&Human{W: &full, Diff: true, Verbose: true},
			&Quiet{Next: &Human{W: &quiet, Diff: true}},
			&Progress{W: &prog, TTY: true, Next: &Human{W: &prog, Diff: true}},
		} {
			o.PlayStart(changed.Play, []string{host, "victim"})
			o.TaskStart(changed.Task, false)
			o.Result(changed)
			o.Result(ok)
			o.TaskStart(value, true)
			o.Result(failed)
			o.Done(r)
		}
		for name, b := range map[string][]byte{"full": full.Bytes(), "quiet": quiet.Bytes()} {
			out := string(b)
			if !utf8.ValidString(out) {
				t.Fatalf("%s: output is not UTF-8: %q", name, out)
			}
			for _, c := range out {
				if c != '\n' && c != '\t' && safetext.Unsafe(c) {
					t.Fatalf("%s: raw %U in the output:\n%q", name, c, out)
				}
			}
			checkLines(t, name, out, host, name == "full")
		}
		// The progress line is drawn with \r and ESC[K, which are the
		// tool's own; nothing else may be raw.
		p := strings.ReplaceAll(prog.String(), "\r\x1b[K", "")
		for _, c := range p {
			if c != '\n' && c != '\t' && safetext.Unsafe(c) {
				t.Fatalf("progress: raw %U in the output:\n%q", c, p)
			}
		}

		var js bytes.Buffer
		if err := (View{Diff: true}).WriteJSON(&js, r); err != nil {
			t.Fatal(err)
		}
		if !json.Valid(js.Bytes()) {
			t.Fatalf("the JSON report is not valid JSON:\n%s", js.Bytes())
		}
		var doc struct {
			Results []struct {
				Host   string `json:"host"`
				Msg    string `json:"msg"`
				Result *struct {
					Output string `json:"output"`
				} `json:"result"`
			} `json:"results"`
		}
		if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
			t.Fatalf("the JSON report does not decode: %v", err)
		}
		exact := func(s string) bool { return utf8.ValidString(s) && redact.Text(s) == s && redact.Values(s) == s }
		if len(doc.Results) != 3 {
			t.Fatalf("the JSON report has %d results, want 3", len(doc.Results))
		}
		if exact(host) && doc.Results[0].Host != host {
			t.Errorf("the JSON report's host is %q, want %q", doc.Results[0].Host, host)
		}
		if exact(msg) && doc.Results[0].Msg != msg {
			t.Errorf("the JSON report's msg is %q, want %q", doc.Results[0].Msg, msg)
		}
		if exact(output) && (doc.Results[0].Result == nil || doc.Results[0].Result.Output != output) {
			t.Errorf("the JSON report's output is not %q: %+v", output, doc.Results[0].Result)
		}
	})
}

// checkLines: one status line per result of the run (two for host, one
// for victim in the full output; the failure alone with --quiet), each
// for its own host, and after the last RECAP header one recap line per
// host, each its own.
func checkLines(t *testing.T, name, out, host string, full bool) {
	t.Helper()
	want := []string{"changed: [" + safetext.Name(host) + "]", "ok: [victim]", "failed: [" + safetext.Name(host) + "]"}
	if !full {
		want = want[2:]
	}
	lines := strings.Split(out, "\n")
	var status []string
	recapAt := -1
	for i, l := range lines {
		if statusLine.MatchString(l) {
			status = append(status, l)
		}
		if l == "RECAP" {
			recapAt = i
		}
	}
	if len(status) != len(want) {
		t.Fatalf("%s: %d status lines, want %d:\n%s", name, len(status), len(want), out)
	}
	for i, l := range status {
		if !strings.HasPrefix(l, want[i]) {
			t.Fatalf("%s: status line %q, want one that starts with %q:\n%s", name, l, want[i], out)
		}
	}
	if recapAt < 0 {
		t.Fatalf("%s: no RECAP header:\n%s", name, out)
	}
	var recap []string
	for _, l := range lines[recapAt+1:] {
		if recapLine.MatchString(l) {
			recap = append(recap, l)
		}
	}
	// In first-seen order, as the run lists them.
	hosts := []string{safetext.Name(host), "victim"}
	if len(recap) != 2 {
		t.Fatalf("%s: %d recap lines, want 2:\n%s", name, len(recap), out)
	}
	for i, l := range recap {
		if !strings.HasPrefix(l, hosts[i]+" ") {
			t.Fatalf("%s: recap line %q is not %q's:\n%s", name, l, hosts[i], out)
		}
	}
}
