package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"nodeconverge/engine/module"
	"nodeconverge/engine/report"
	"nodeconverge/lab/browser"
	"nodeconverge/lab/labtest"
)

// badDropin is a change the node's containerd takes but its CRI plugin
// cannot run with: on containerd 1.x the drop-in replaces the whole CRI
// table (the incident's mechanism), and its default runtime does not exist.
// The copy writes it unvalidated, so only the restart's health gate finds
// out, and the host's run is rolled back.
const badDropin = `
    - name: a default runtime that does not exist (omen only)
      when: inventory_hostname == 'omen'
      copy:
        dest: /etc/containerd/conf.d/zz-bad.toml
        content: |
          version = 2
          [plugins."io.containerd.grpc.v1.cri".containerd]
            default_runtime_name = "nvidia-missing"
      notify: restart containerd
`

// TestHTMLReportInBrowser: a real run's HTML report, opened in headless
// Chromium, shows each host with its status (nuc1 unreachable, nuc2
// drifted and converged, omen failed and rolled back, omen2 not attempted
// after the play stopped), a click on the failed host shows its diff and
// its message, the status, group and host filters work, and the registry
// password in the nodes' config is nowhere in the page or its DOM while
// its redacted diff is shown.
func TestHTMLReportInBrowser(t *testing.T) {
	const secret = "L4b-Harb0r-pw-51c2"
	l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident"})
	auth := "\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"harbor.lab\".auth]\n  username = \"robot\"\n  password = \"" + secret + "\"\n"
	for _, n := range l.Nodes {
		p := l.NodePath(n.Name, "/etc/containerd/config.toml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), "SystemdCgroup = true\n", "SystemdCgroup = true\n"+auth, 1)
		if s == string(b) {
			t.Fatalf("%s: no anchor for the registry auth", n.Name)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shipped, err := os.ReadFile(shippedPlaybook())
	if err != nil {
		t.Fatal(err)
	}
	pbText := strings.Replace(string(shipped), "\n  handlers:\n", badDropin+"\n  handlers:\n", 1)
	if pbText == string(shipped) {
		t.Fatal("shipped playbook has no handlers section to put the bad task before")
	}
	pb := writePlaybook(t, pbText)
	dir := t.TempDir()
	rack := filepath.Join(dir, "rack2.yaml")
	if err := os.WriteFile(rack, []byte("all:\n  children:\n    rack2:\n      hosts:\n        omen:\n        omen2:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.StopSSHD(t, "nuc1")
	page, js := filepath.Join(dir, "run.html"), filepath.Join(dir, "run.json")
	r := nc(t, append([]string{"apply", "--diff", "-i", rack, "--report", "html=" + page, "--report", "json=" + js}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "unreachable: [nuc1]") || !strings.Contains(r.stdout, "failed: [omen]") || !strings.Contains(r.stdout, "not attempted") {
		t.Fatalf("want nuc1 unreachable, omen failed and omen2 not attempted:\n%s", r)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) {
		t.Fatalf("the HTML report holds the registry password")
	}
	jsRaw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var jrep struct {
		Results []struct {
			Host, Status string
			RolledBack   []string `json:"rolled_back"`
		}
	}
	if err := json.Unmarshal(jsRaw, &jrep); err != nil {
		t.Fatal(err)
	}

	b := openReport(t, page)
	rows := func() map[string]string {
		t.Helper()
		got, err := browser.Eval[map[string]string](b, browserLimit, `Object.fromEntries([...document.querySelectorAll("#grid tbody tr")].map(tr => [tr.dataset.host, tr.dataset.status]))`)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := map[string]string{"nuc1": "unreachable", "nuc2": "changed", "omen": "failed", "omen2": "notattempted"}
	if d := cmp.Diff(want, rows()); d != "" {
		t.Fatalf("hosts and their statuses in the grid (-want +got):\n%s", d)
	}
	counts, err := browser.Eval[map[string]string](b, browserLimit, `Object.fromEntries([...document.querySelectorAll("#counts button")].map(e => [e.dataset.status || "all", e.querySelector(".n").textContent]))`)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"all": "4", "unreachable": "1", "changed": "1", "failed": "1", "notattempted": "1"}, counts); d != "" {
		t.Errorf("counts at the top (-want +got):\n%s", d)
	}

	// A click on the failed host opens its panel: its diffs and its message.
	if err := b.Do(browserLimit, chromedp.Click(chromedp.CSS(`#grid tbody tr[data-host="omen"] td.host button`)),
		chromedp.WaitVisible(chromedp.CSS(`#panel[data-host="omen"]`))); err != nil {
		t.Fatalf("click omen: %v", err)
	}
	type panelView struct {
		Status, Text string
		Diffs        []string
		Msgs         []string
		RolledBack   string
	}
	pv, err := browser.Eval[panelView](b, browserLimit, `(() => { const p = document.getElementById("panel"); return {
		status: p.dataset.status, text: p.innerText,
		diffs: [...p.querySelectorAll("pre.diff")].map(e => e.innerText),
		msgs: [...p.querySelectorAll("pre.msg.bad")].map(e => e.innerText),
		rolledBack: [...p.querySelectorAll(".rb")].map(e => e.innerText).join("\n") }; })()`)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Status != "failed" {
		t.Errorf("omen's panel says %q, want failed", pv.Status)
	}
	joined := strings.Join(pv.Diffs, "\n")
	if !strings.Contains(joined, "+++ omen:/etc/containerd/conf.d/zz-bad.toml") || !strings.Contains(joined, `+  default_runtime_name = "nvidia-missing"`) {
		t.Errorf("omen's panel does not show the diff of its bad drop-in:\n%s", joined)
	}
	if !strings.Contains(joined, "<redacted>") {
		t.Errorf("omen's diffs show no redacted registry password; the auth block should be in a diff's context:\n%s", joined)
	}
	msgs := strings.Join(pv.Msgs, "\n")
	if !strings.Contains(msgs, "nvidia-missing") || !strings.Contains(msgs, "rolled back") {
		t.Errorf("omen's panel lacks the failure's message (the gate's finding and the rollback):\n%s", msgs)
	}
	if !strings.Contains(pv.RolledBack, "/etc/containerd/conf.d/zz-bad.toml") {
		t.Errorf("omen's panel does not say what the rollback restored:\n%s", pv.RolledBack)
	}
	var jsonRolledBack []string
	for _, res := range jrep.Results {
		if res.Host == "omen" && res.Status == "failed" {
			jsonRolledBack = res.RolledBack
		}
	}
	for _, p := range jsonRolledBack {
		if !strings.Contains(pv.RolledBack, p) {
			t.Errorf("the JSON report's rolled_back path %s is not in the panel:\n%s", p, pv.RolledBack)
		}
	}
	if !strings.Contains(pv.Text, "nodeconverge apply --check --diff") {
		t.Errorf("omen's panel says nothing about what to do:\n%s", pv.Text)
	}
	if os.Getenv("NODECONVERGE_HTML_SCREENSHOT") != "" {
		png, err := b.Screenshot(browserLimit)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv("NODECONVERGE_HTML_SCREENSHOT"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The filters, as a person uses them: the status list, the group
	// list, the host field; and the count buttons.
	// A choice in a list is what the browser does for a person's pick:
	// the value set, then the change event.
	choose := func(id, value string) {
		t.Helper()
		ok, err := browser.Eval[bool](b, browserLimit, fmt.Sprintf(`(() => { const s = document.getElementById(%q);
			if (![...s.options].some(o => o.value === %q)) return false;
			s.value = %q; return s.dispatchEvent(new Event("change")); })()`, id, value, value))
		if err != nil || !ok {
			t.Fatalf("choose %q in #%s: offered %v, %v", value, id, ok, err)
		}
	}
	keys := func(m map[string]string) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	choose("f-status", "failed")
	if got := keys(rows()); !cmp.Equal(got, []string{"omen"}) {
		t.Errorf("status filter failed: rows %v, want [omen]", got)
	}
	choose("f-status", "")
	choose("f-group", "rack2")
	if got := keys(rows()); !cmp.Equal(got, []string{"omen", "omen2"}) {
		t.Errorf("group filter rack2: rows %v, want [omen omen2]", got)
	}
	choose("f-group", "")
	if err := b.Do(browserLimit, chromedp.SendKeys(chromedp.CSS("#f-host"), "nuc")); err != nil {
		t.Fatal(err)
	}
	if got := keys(rows()); !cmp.Equal(got, []string{"nuc1", "nuc2"}) {
		t.Errorf("host filter nuc: rows %v, want [nuc1 nuc2]", got)
	}
	if _, err := browser.Eval[bool](b, browserLimit, `(() => { const e = document.getElementById("f-host"); e.value = ""; return e.dispatchEvent(new Event("input")); })()`); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(browserLimit, chromedp.Click(chromedp.CSS(`#counts button[data-status="unreachable"]`))); err != nil {
		t.Fatal(err)
	}
	if got := keys(rows()); !cmp.Equal(got, []string{"nuc1"}) {
		t.Errorf("count button unreachable: rows %v, want [nuc1]", got)
	}

	// The secret is in no part of the live page either (the DOM the
	// script built, the data it read).
	dom, err := browser.Eval[string](b, browserLimit, `document.documentElement.outerHTML + JSON.stringify(window.ncReport) + location.href`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dom, secret) {
		t.Error("the rendered page holds the registry password")
	}
}

// TestHTMLFleetPageInBrowser: a 300-host page, its data compressed as a
// fleet's is, opens in Chromium with every host counted, 100 a page, the
// next page and a group filter working; a node's message that holds markup
// and control characters is shown as text (nothing of it runs), the
// escape bytes and the bidi override visible.
func TestHTMLFleetPageInBrowser(t *testing.T) {
	r := report.NewRun("20261202T000000Z-fleet", true)
	groups := map[string][]string{}
	for i := range 300 {
		h := fmt.Sprintf("gpu%03d", i)
		groups[h] = []string{"gpu", fmt.Sprintf("rack%d", i%3)}
		tr := &report.TaskResult{Play: "p", Task: "settings", Module: "containerd_settings", Host: h, Status: report.OK}
		switch {
		case i%10 == 0:
			tr.Status, tr.Plan = report.Changed, &module.Plan{Files: []module.FileChange{{Action: module.Update, Path: "/etc/containerd/config.toml"}}}
		case i == 7:
			tr.Status, tr.Msg = report.Failed, "node said <img src=x onerror=\"window.pwned=1\"> \x1b[31mred\x1b[0m \u202egnp.exe\u2028"
		}
		r.Add(tr)
	}
	r.SetGroups(groups)
	page := filepath.Join(t.TempDir(), "fleet.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := (report.View{CompressAbove: 1}).WriteHTML(f, r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b := openReport(t, page)
	type view struct {
		Rows   int
		Pageno string
		Counts map[string]string
		First  string
	}
	look := func() view {
		t.Helper()
		v, err := browser.Eval[view](b, browserLimit, `({ rows: document.querySelectorAll("#grid tbody tr").length,
			pageno: (document.getElementById("pageno") || {}).textContent || "",
			counts: Object.fromEntries([...document.querySelectorAll("#counts button")].map(e => [e.dataset.status || "all", e.querySelector(".n").textContent])),
			first: (document.querySelector("#grid tbody tr") || { dataset: {} }).dataset.host || "" })`)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := look()
	if d := cmp.Diff(map[string]string{"all": "300", "ok": "269", "changed": "30", "failed": "1"}, v.Counts); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
	if v.Rows != 100 || !strings.Contains(v.Pageno, "page 1 of 3") {
		t.Errorf("first page: %d rows, %q; want 100 rows of page 1 of 3", v.Rows, v.Pageno)
	}
	if err := b.Do(browserLimit, chromedp.Click(chromedp.CSS("#next"))); err != nil {
		t.Fatal(err)
	}
	if v := look(); v.Rows != 100 || !strings.Contains(v.Pageno, "page 2 of 3") {
		t.Errorf("after next: %d rows, %q; want page 2 of 3", v.Rows, v.Pageno)
	}
	if _, err := browser.Eval[bool](b, browserLimit, `(() => { const s = document.getElementById("f-group"); s.value = "rack1"; return s.dispatchEvent(new Event("change")); })()`); err != nil {
		t.Fatal(err)
	}
	if v := look(); v.Rows != 100 || !strings.Contains(v.Pageno, "page 1 of 1") && v.Pageno != "" {
		t.Errorf("group rack1: %d rows, %q; want its 100 hosts on one page", v.Rows, v.Pageno)
	}
	if err := b.Do(browserLimit, chromedp.Click(chromedp.CSS(`#counts button[data-status="failed"]`)),
		chromedp.Click(chromedp.CSS(`#grid tbody tr[data-host="gpu007"] td.host button`)),
		chromedp.WaitVisible(chromedp.CSS(`#panel[data-host="gpu007"]`))); err != nil {
		t.Fatal(err)
	}
	type hostile struct {
		Pwned bool
		Imgs  int
		Ctl   []string
		Msg   string
	}
	h, err := browser.Eval[hostile](b, browserLimit, `({ pwned: !!window.pwned, imgs: document.querySelectorAll("#panel img").length,
		ctl: [...document.querySelectorAll("#panel .ctl")].map(e => e.textContent), msg: document.querySelector("#panel pre.msg").textContent })`)
	if err != nil {
		t.Fatal(err)
	}
	if h.Pwned || h.Imgs != 0 || !strings.Contains(h.Msg, `<img src=x onerror="window.pwned=1">`) {
		t.Errorf("a node's markup must be shown as text, never run: %+v", h)
	}
	if !cmp.Equal(h.Ctl, []string{`\x1b`, `\x1b`, `\u202e`, `\u2028`}) {
		t.Errorf("the control characters shown as %q, want visible \\x1b, \\x1b, \\u202e, \\u2028", h.Ctl)
	}
}

// TestHTMLProofFailedInBrowser (issues 26, 31): the page of a real
// `apply --check --prove` run, one of whose two nodes has a toolkit that
// exits 1, shows that host as "proof failed" in the grid (its prove
// column's cell coloured so) and the other ok; the broken host's panel has
// one row per proof, each with the status, the daemon's reason and how
// the daemon was reached exactly as the JSON report of the same run holds
// them: nvidia failed with the runtime's error, runc proved.
func TestHTMLProofFailedInBrowser(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean"})
	broken, fine := l.Nodes[0].Name, l.Nodes[1].Name
	for _, n := range l.Nodes {
		if err := os.WriteFile(l.NodePath(n.Name, "/etc/containerd/config.toml"), []byte(faultBase(2, "io.containerd.grpc.v1.cri")), 0o644); err != nil {
			t.Fatal(err)
		}
		l.Exec(t, n.Name, "systemctl", "restart", "containerd")
	}
	brokenToolkit(t, l, broken)
	pb := writePlaybook(t, `
- name: prove only
  hosts: all
  tasks: []
  handlers:
    - name: restart containerd
      containerd_restart:
        runtimes: [nvidia]
`)
	dir := t.TempDir()
	page, js := filepath.Join(dir, "prove.html"), filepath.Join(dir, "prove.json")
	r := nc(t, append([]string{"apply", "--check", "--prove", "--report", "html=" + page, "--report", "json=" + js}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	rep := readProofReport(t, js)
	type proofRow struct{ What, Status, Reason, Via string }
	wantRows := map[string][]proofRow{}
	for _, res := range rep.Results {
		for _, p := range res.Proofs {
			// The panel shows the reason, else what was proved.
			why := p.Reason
			if why == "" {
				why = p.Detail
			}
			wantRows[res.Host] = append(wantRows[res.Host], proofRow{What: strings.TrimSpace(p.Kind + " " + p.Name), Status: p.Status, Reason: why, Via: p.Via})
		}
	}
	if len(wantRows[broken]) != 2 {
		t.Fatalf("the JSON report has %d proofs for %s, want nvidia and runc:\n%s", len(wantRows[broken]), broken, r)
	}

	b := openReport(t, page)
	type gridView struct {
		Rows   map[string]string
		Cells  map[string]string
		Titles map[string]string
		Counts map[string]string
		Colour string
	}
	gv, err := browser.Eval[gridView](b, browserLimit, `({
		rows: Object.fromEntries([...document.querySelectorAll("#grid tbody tr")].map(tr => [tr.dataset.host, tr.dataset.status])),
		cells: Object.fromEntries([...document.querySelectorAll("#grid tbody tr")].map(tr => [tr.dataset.host, tr.querySelector("td.cell").className])),
		titles: Object.fromEntries([...document.querySelectorAll("#grid tbody tr")].map(tr => [tr.dataset.host, tr.querySelector("td.cell").title])),
		counts: Object.fromEntries([...document.querySelectorAll("#counts button")].map(e => [e.dataset.status || "all", e.querySelector(".n").textContent])),
		colour: getComputedStyle(document.querySelector("#grid tbody tr[data-status=prooffail] td.cell")).backgroundColor })`)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{broken: "prooffail", fine: "ok"}, gv.Rows); d != "" {
		t.Errorf("hosts and their statuses in the grid (-want +got):\n%s", d)
	}
	if gv.Cells[broken] != "cell s-prooffail" || gv.Cells[fine] != "cell s-ok" || !strings.Contains(gv.Titles[broken], "prove: restart containerd: proof failed") {
		t.Errorf("the prove column's cells: classes %v, titles %v", gv.Cells, gv.Titles)
	}
	// The proof-failed colour (--prooffail, #d84315), not the failed one.
	if gv.Colour != "rgb(216, 67, 21)" {
		t.Errorf("a proof-failed cell is coloured %s, want rgb(216, 67, 21)", gv.Colour)
	}
	if d := cmp.Diff(map[string]string{"all": "2", "prooffail": "1", "ok": "1"}, gv.Counts); d != "" {
		t.Errorf("counts at the top (-want +got):\n%s", d)
	}

	if err := b.Do(browserLimit, chromedp.Click(chromedp.CSS(`#grid tbody tr[data-host="`+broken+`"] td.host button`)),
		chromedp.WaitVisible(chromedp.CSS(`#panel[data-host="`+broken+`"]`))); err != nil {
		t.Fatalf("click %s: %v", broken, err)
	}
	type panelView struct {
		Status string
		Todo   string
		Rows   []proofRow
		Bad    []string
	}
	panel := func() panelView {
		t.Helper()
		pv, err := browser.Eval[panelView](b, browserLimit, `(() => { const p = document.getElementById("panel"); return {
			status: p.dataset.status, todo: document.getElementById("todo").innerText,
			rows: [...p.querySelectorAll("table.proofs tr.proof")].map(tr => ({ what: tr.querySelector(".what").textContent,
				status: tr.dataset.status, reason: tr.querySelector(".reason").textContent, via: tr.querySelector(".via").textContent })),
			bad: [...p.querySelectorAll("table.proofs tr.proof.bad")].map(tr => tr.querySelector(".what").textContent) }; })()`)
		if err != nil {
			t.Fatal(err)
		}
		return pv
	}
	pv := panel()
	if pv.Status != "prooffail" || !strings.Contains(pv.Todo, "failed its proof by pod") || !strings.Contains(pv.Todo, "--check --prove") {
		t.Errorf("%s's panel: status %q, what to do %q", broken, pv.Status, pv.Todo)
	}
	// The panel's proofs are the JSON report's, reason text and all.
	if d := cmp.Diff(wantRows[broken], pv.Rows); d != "" {
		t.Errorf("%s's proofs in the panel are not the JSON report's (-json +panel):\n%s", broken, d)
	}
	var nvidia proofRow
	for _, row := range pv.Rows {
		if row.What == "runtime nvidia" {
			nvidia = row
		}
	}
	if nvidia.Status != "failed" || !strings.Contains(nvidia.Reason, "driver not loaded") || !strings.Contains(nvidia.Via, "CRI") {
		t.Errorf("%s's nvidia proof in the panel: %+v; want failed with the runtime's error and the way the daemon was reached", broken, nvidia)
	}
	if !cmp.Equal(pv.Bad, []string{"runtime nvidia"}) {
		t.Errorf("rows marked bad: %v, want only runtime nvidia", pv.Bad)
	}

	if err := b.Do(browserLimit, chromedp.Click(chromedp.CSS(`#grid tbody tr[data-host="`+fine+`"] td.host button`)),
		chromedp.WaitVisible(chromedp.CSS(`#panel[data-host="`+fine+`"]`))); err != nil {
		t.Fatalf("click %s: %v", fine, err)
	}
	pv = panel()
	if pv.Status != "ok" || len(pv.Rows) != 2 || len(pv.Bad) != 0 {
		t.Errorf("%s's panel: %+v; want ok with nvidia and runc proved", fine, pv)
	}
	for _, row := range pv.Rows {
		if row.Status != "proved" {
			t.Errorf("%s: %+v, want proved", fine, row)
		}
	}
}

// browserLimit bounds each step the tests ask of the browser.
const browserLimit = 30 * time.Second

// openReport opens page in a fresh headless Chromium, closed when the test
// ends, and waits until the report's script says it has drawn the page.
func openReport(t *testing.T, page string) *browser.Browser {
	t.Helper()
	b, err := browser.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := b.Do(browserLimit, chromedp.Navigate("file://"+page), chromedp.WaitReady(chromedp.CSS("body[data-ready]"))); err != nil {
		t.Fatalf("open the report %s: %v", page, err)
	}
	return b
}
