package report

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html"
	"io"
)

// CompressAbove is the size of the run's data past which the page carries
// it gzip-compressed (base64): a small run's page holds the JSON report as
// text, which a reader can grep; a fleet's would be tens of megabytes.
const CompressAbove = 1 << 20

func (v View) compressAbove() int {
	if v.CompressAbove != 0 {
		return v.CompressAbove
	}
	return CompressAbove
}

// The page's style and script, written for this project and inlined into
// every HTML report: the report opens from a mail attachment or an artifact
// store with no network (its Content-Security-Policy allows none).
var (
	//go:embed html/report.css
	htmlCSS string
	//go:embed html/report.js
	htmlJS string
)

// WriteHTML writes the run as one self-contained HTML page (see View).
func WriteHTML(w io.Writer, r *Run) error { return View{}.WriteHTML(w, r) }

// WriteHTML writes the run as one self-contained HTML page: the fleet as a
// grid of hosts by tasks, then one host's results on a click. The page is a
// view of the JSON report: it embeds exactly the bytes WriteJSON writes
// (compacted, redacted the same way) in a script element of type
// application/json, and its script only lays them out, so the page shows
// nothing the JSON report does not hold and hides no secret the JSON
// report hides. In those bytes '<', '>' and '&' are always escaped
// (\u003c...), so no string of the run can end the element or open markup.
// Data over CompressAbove bytes goes in gzip-compressed and base64-encoded
// instead (the same bytes once decompressed), so a fleet's page stays small.
func (v View) WriteHTML(w io.Writer, r *Run) error {
	data, err := v.encode(r, "")
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Grow(len(data) + len(htmlCSS) + len(htmlJS) + 1024)
	b.WriteString(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="nodeconverge">
<title>nodeconverge run `)
	b.WriteString(html.EscapeString(r.ID))
	b.WriteString("</title>\n<style>\n")
	b.WriteString(htmlCSS)
	b.WriteString("</style>\n</head>\n<body>\n<noscript>This report is laid out by its script. The run's data is the JSON report inside the script element \"nc-report\" of this file (gzip and base64 in \"nc-report-gz\" for a large run).</noscript>\n<div id=\"app\"></div>\n")
	if len(data) <= v.compressAbove() {
		b.WriteString("<script type=\"application/json\" id=\"nc-report\">")
		b.Write(scriptSafe(data))
	} else {
		// A fleet's report repeats itself host after host (the same
		// plans, diffs and evidence): compressed it is a few percent of
		// its size, so the page stays small enough to mail. The browser
		// decompresses it itself (DecompressionStream).
		b.WriteString("<script type=\"application/gzip-base64\" id=\"nc-report-gz\">")
		var z bytes.Buffer
		zw, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
		if err != nil {
			return fmt.Errorf("compress report: %w", err)
		}
		if _, err := zw.Write(data); err != nil {
			return fmt.Errorf("compress report: %w", err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("compress report: %w", err)
		}
		enc := base64.NewEncoder(base64.StdEncoding, &b)
		if _, err := enc.Write(z.Bytes()); err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		if err := enc.Close(); err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
	}
	b.WriteString("</script>\n<script>\n")
	b.WriteString(htmlJS)
	b.WriteString("</script>\n</body>\n</html>\n")
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// scriptSafe escapes what could end a script element or be read as markup
// inside one. In JSON those characters occur only inside strings, where
// \u003c is the same character, so the document decodes to the same value.
// U+2028 and U+2029 are escaped too, for readers that take the data as
// JavaScript source.
func scriptSafe(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/16)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '<':
			out.WriteString(`\u003c`)
		case '>':
			out.WriteString(`\u003e`)
		case '&':
			out.WriteString(`\u0026`)
		case 0xe2:
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9) {
				fmt.Fprintf(&out, `\u%04x`, 0x2028+int(b[i+2]-0xa8))
				i += 2
				continue
			}
			out.WriteByte(c)
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}
