package nvidiatoml

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// The golden files use the txtar format. github.com/rogpeppe/go-internal's
// txtar (v1.16) is a thin alias of golang.org/x/tools/txtar, which has no
// go.sum entry in this module, so this file reads and writes the format
// itself: a free-form comment, then files introduced by `-- name --` lines.

// archive is a parsed txtar file.
type archive struct {
	comment []byte
	files   []archiveFile
}

type archiveFile struct {
	name string
	data []byte
}

func parseArchiveFile(path string) (*archive, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	return parseArchive(b), nil
}

// parseArchive splits b at marker lines. A file's data ends with the
// newline before the next marker, as in txtar.
func parseArchive(b []byte) *archive {
	a := &archive{}
	cur := &a.comment
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		b = b[len(line):]
		if name, ok := markerName(line); ok {
			a.files = append(a.files, archiveFile{name: name, data: []byte{}})
			cur = &a.files[len(a.files)-1].data
			continue
		}
		*cur = append(*cur, line...)
	}
	return a
}

func markerName(line []byte) (string, bool) {
	s := strings.TrimSuffix(string(line), "\n")
	if !strings.HasPrefix(s, "-- ") || !strings.HasSuffix(s, " --") || len(s) < 7 {
		return "", false
	}
	return strings.TrimSpace(s[3 : len(s)-3]), true
}

// format writes a; every file's data gets a final newline, as in txtar.
func (a *archive) format() []byte {
	var b bytes.Buffer
	b.Write(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&b, "-- %s --\n", f.name)
		b.Write(f.data)
		if len(f.data) > 0 && f.data[len(f.data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
