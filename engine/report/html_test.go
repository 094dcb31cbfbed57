package report

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/engine/module"
	"nodeconverge/engine/redact"
)

// htmlRun is a run with a secret in every place a report could show one: a
// file's content (its diff), a command line, a message, a command's output,
// validation output, an effective-config value, and a secret-named
// variable's value wherever it ended up.
func htmlRun(t *testing.T, fileSecret, varSecret string) *Run {
	t.Helper()
	redact.AddVars(map[string]any{"harbor_password": varSecret})
	before := []byte("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"harbor.lab\".auth]\n  username = \"robot\"\n  password = \"" + fileSecret + "\"\n")
	after := append(append([]byte{}, before...), []byte("[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.9\"\n")...)
	plan := &module.Plan{
		Files: []module.FileChange{{Action: module.Update, Path: "/etc/containerd/config.toml", Before: before, After: after,
			BeforeHash: module.Hash(before), AfterHash: module.Hash(after), Mode: 0o644}},
		Effective: []module.EffectiveChange{{Key: `plugins."io.containerd.grpc.v1.cri".sandbox_image`, Before: `"registry.k8s.io/pause:3.6"`, After: `"registry.k8s.io/pause:3.9"`}},
		Evidence:  []module.Evidence{{What: "candidate loads", Command: "containerd config dump", OK: true, Output: "password = \"" + fileSecret + "\"", Required: true}},
		Drift:     []string{"cri.sandbox_image: not effective: declared \"registry.k8s.io/pause:3.9\", set by /etc/containerd/config.toml"},
	}
	r := NewRun("20261203T010000Z-abc", false)
	r.Add(&TaskResult{Play: "p", Task: "settings", Module: "containerd_settings", Host: "nuc1", Status: Changed, Plan: plan,
		Result: &module.Result{Changed: true}})
	r.Add(&TaskResult{Play: "p", Task: "login", Module: "command", Host: "omen", Status: Failed,
		Plan:       &module.Plan{Commands: []string{"login --password " + varSecret}},
		Msg:        "login --password " + varSecret + " exited 1: https://robot:" + fileSecret + "@harbor.lab refused </script><script>alert(1)</script> <!-- \x1b[31m",
		Result:     &module.Result{Output: "token: " + fileSecret},
		RolledBack: []string{"/etc/containerd/config.toml"}})
	r.Add(&TaskResult{Play: "p", Task: "", Host: "omen2", Status: Unreachable, Msg: "dial tcp 127.0.0.1:22: connection refused"})
	r.NotAttempt("nuc2", "play \"p\" stopped in batch 2")
	r.SetGroups(map[string][]string{"nuc1": {"gpu"}, "omen": {"gpu"}, "omen2": {"gpu"}, "nuc2": {"cpu"}})
	return r
}

var dataElement = regexp.MustCompile(`(?s)<script type="application/json" id="nc-report">(.*?)</script>`)

// TestHTMLIsTheJSONReport: the page embeds the JSON report's data, value
// for value (the page computes nothing of its own), with the diffs of a
// --diff run, and the secrets redacted in it as in the JSON report.
func TestHTMLIsTheJSONReport(t *testing.T) {
	const fileSecret, varSecret = "F1le-S3cret-91", "V4r-S3cret-<&>-27"
	r := htmlRun(t, fileSecret, varSecret)
	v := View{Diff: true}
	var page, js bytes.Buffer
	if err := v.WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	m := dataElement.FindSubmatch(page.Bytes())
	if m == nil {
		t.Fatalf("no data element in the page:\n%s", page.String())
	}
	var fromPage, fromJSON any
	if err := json.Unmarshal(m[1], &fromPage); err != nil {
		t.Fatalf("the page's data is not JSON: %v", err)
	}
	if err := json.Unmarshal(js.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fromJSON, fromPage); d != "" {
		t.Errorf("the page's data differs from the JSON report (-json +page):\n%s", d)
	}
	if !strings.Contains(js.String(), `"diff": "--- nuc1:/etc/containerd/config.toml`) || !strings.Contains(js.String(), `+  sandbox_image`) {
		t.Errorf("the JSON report of a --diff run lacks the diff:\n%s", js.String())
	}
	if !strings.Contains(js.String(), `"groups"`) || !strings.Contains(js.String(), `"not_attempted"`) {
		t.Errorf("the JSON report lacks groups or not_attempted:\n%s", js.String())
	}
	for _, secret := range []string{fileSecret, varSecret, "V4r-S3cret-", `V4r-S3cret-\u003c`} {
		if bytes.Contains(page.Bytes(), []byte(secret)) {
			t.Errorf("the page holds the secret %q", secret)
		}
		if bytes.Contains(js.Bytes(), []byte(secret)) {
			t.Errorf("the JSON report holds the secret %q", secret)
		}
	}
	if !bytes.Contains(m[1], []byte(`\u003credacted\u003e`)) {
		t.Errorf("the page's data shows no redacted value; did the diff go missing?")
	}
}

// TestHTMLNoDiffWithoutDiff: without --diff no report carries file
// content, not even redacted.
func TestHTMLNoDiffWithoutDiff(t *testing.T) {
	r := htmlRun(t, "F1le-S3cret-92", "V4r-S3cret-28")
	var page bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	m := dataElement.FindSubmatch(page.Bytes())
	if m == nil || bytes.Contains(m[1], []byte(`"diff"`)) || bytes.Contains(page.Bytes(), []byte("username")) {
		t.Errorf("a report of a run without --diff holds file content")
	}
}

// TestHTMLDataCannotEndItsElement: a run's strings are data: whatever a node
// prints, the page has exactly its own two script elements, no markup of
// the run's, and no way to fetch anything (its policy allows no network).
func TestHTMLDataCannotEndItsElement(t *testing.T) {
	r := htmlRun(t, "F1le-S3cret-93", "V4r-S3cret-29")
	var page bytes.Buffer
	if err := (View{Diff: true}).WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	s := page.String()
	if n := strings.Count(strings.ToLower(s), "</script"); n != 2 {
		t.Errorf("page has %d script end tags, want 2 (its data and its code)", n)
	}
	if n := strings.Count(strings.ToLower(s), "<script"); n != 2 {
		t.Errorf("page has %d script start tags, want 2", n)
	}
	for _, bad := range []string{"<!--", "alert(1)</", "\x1b", "\u2028"} {
		if strings.Contains(s, bad) {
			t.Errorf("page holds %q raw", bad)
		}
	}
	if !strings.Contains(s, `content="default-src 'none';`) {
		t.Error("page has no policy that forbids network access")
	}
	for _, ext := range []string{"http://", "https://", "src=\"", "href=\"", "@import", "url("} {
		if strings.Contains(htmlJS+htmlCSS, ext) {
			t.Errorf("the page's own code refers to %q: it must need nothing from outside", ext)
		}
	}
}

var gzElement = regexp.MustCompile(`(?s)<script type="application/gzip-base64" id="nc-report-gz">([A-Za-z0-9+/=]*)</script>`)

// TestHTMLCompressedIsTheJSONReport: past CompressAbove the page carries
// the same data gzip-compressed; decompressed it is the JSON report, with
// no secret in it, and the page has no other copy of the data.
func TestHTMLCompressedIsTheJSONReport(t *testing.T) {
	const fileSecret, varSecret = "F1le-S3cret-94", "V4r-S3cret-30"
	r := htmlRun(t, fileSecret, varSecret)
	v := View{Diff: true, CompressAbove: 1}
	var page, js bytes.Buffer
	if err := v.WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	if dataElement.Match(page.Bytes()) {
		t.Fatal("a compressed page also holds the plain data")
	}
	m := gzElement.FindSubmatch(page.Bytes())
	if m == nil {
		t.Fatalf("no compressed data element in the page")
	}
	z, err := base64.StdEncoding.DecodeString(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var fromPage, fromJSON any
	if err := json.Unmarshal(data, &fromPage); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fromJSON, fromPage); d != "" {
		t.Errorf("the page's data differs from the JSON report (-json +page):\n%s", d)
	}
	for _, secret := range []string{fileSecret, varSecret} {
		if bytes.Contains(data, []byte(secret)) || bytes.Contains(page.Bytes(), []byte(secret)) {
			t.Errorf("the compressed page holds the secret %q", secret)
		}
	}
}
