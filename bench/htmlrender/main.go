// Command htmlrender opens an HTML report in headless Chromium (lab/browser)
// as a person would and prints, as one JSON object, what `make bench`
// reports about it: its size, its hosts, the time from navigation until the
// page's script has laid out the fleet, the script's own share of it, and the
// time one filter and one host panel take. It fails when the page does not
// show every host of the report or a filter does not narrow the grid.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/chromedp/chromedp"

	"nodeconverge/lab/browser"
)

type figures struct {
	File         string  `json:"file"`
	Bytes        int64   `json:"bytes"`
	Hosts        int     `json:"hosts"`
	BytesPerHost float64 `json:"bytes_per_host"`
	Statuses     any     `json:"statuses"`
	LoadMS       float64 `json:"load_ms"`
	ScriptMS     float64 `json:"script_ms"`
	FilterMS     float64 `json:"filter_ms"`
	FilterRows   int     `json:"filter_rows"`
	FilterStatus string  `json:"filter_status"`
	OpenHostMS   float64 `json:"open_host_ms"`
	Pages        string  `json:"pages"`
}

func main() {
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: htmlrender REPORT.html") }
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := run(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "htmlrender:", err)
		os.Exit(1)
	}
	b, err := json.Marshal(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "htmlrender:", err)
		os.Exit(1)
	}
	fmt.Println(string(b))
}

func run(path string) (*figures, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	f := &figures{File: path, Bytes: st.Size()}
	b, err := browser.Start(context.Background())
	if err != nil {
		return nil, err
	}
	defer b.Close()
	const limit = 2 * time.Minute
	// A blank page first, so the timed navigation does not include the
	// browser's own start.
	if err := b.Do(limit, chromedp.Navigate("about:blank")); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := b.Do(limit, chromedp.Navigate("file://"+path), chromedp.WaitReady(chromedp.CSS("body[data-ready]"))); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f.LoadMS = ms(time.Since(start))
	type state struct {
		Hosts    int            `json:"hosts"`
		Rows     int            `json:"rows"`
		Script   string         `json:"script"`
		Pages    string         `json:"pages"`
		Statuses map[string]int `json:"statuses"`
	}
	s, err := browser.Eval[state](b, limit, `(() => { const d = window.ncReport;
		const st = {}; document.querySelectorAll("#counts button[data-status]").forEach(e => { if (e.dataset.status) st[e.dataset.status] = +e.querySelector(".n").textContent; });
		return { hosts: (d.hosts || []).length, rows: document.querySelectorAll("#grid tbody tr").length,
			script: document.body.dataset.renderMs, pages: (document.getElementById("pageno") || {}).textContent || "1 page", statuses: st }; })()`)
	if err != nil {
		return nil, err
	}
	f.Hosts, f.Statuses, f.Pages = s.Hosts, s.Statuses, s.Pages
	fmt.Sscan(s.Script, &f.ScriptMS)
	total := 0
	for _, n := range s.Statuses {
		total += n
	}
	if s.Hosts == 0 || total != s.Hosts || s.Rows == 0 {
		return nil, fmt.Errorf("the page shows %d rows and counts %v for %d hosts", s.Rows, s.Statuses, s.Hosts)
	}
	f.BytesPerHost = float64(f.Bytes) / float64(f.Hosts)
	// Filter by the rarest status: the narrowest grid a person asks for.
	for k, n := range s.Statuses {
		if f.FilterStatus == "" || n < s.Statuses[f.FilterStatus] {
			f.FilterStatus = k
		}
	}
	start = time.Now()
	rows, err := browser.Eval[int](b, limit, fmt.Sprintf(`(() => { const s = document.getElementById("f-status"); s.value = %q;
		s.dispatchEvent(new Event("change")); return document.querySelectorAll("#grid tbody tr").length; })()`, f.FilterStatus))
	if err != nil {
		return nil, err
	}
	f.FilterMS, f.FilterRows = ms(time.Since(start)), rows
	if want := min(s.Statuses[f.FilterStatus], 100); rows != want {
		return nil, fmt.Errorf("filter %s: %d rows, want %d", f.FilterStatus, rows, want)
	}
	start = time.Now()
	if err := b.Do(limit, chromedp.Click(chromedp.CSS("#grid tbody tr td.host button")), chromedp.WaitVisible(chromedp.CSS("#panel[data-host]"))); err != nil {
		return nil, fmt.Errorf("open a host: %w", err)
	}
	f.OpenHostMS = ms(time.Since(start))
	return f, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
