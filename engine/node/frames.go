package node

import (
	"bytes"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"nodeconverge/engine/transport"
)

// frames reads the records a remote script prints (see prelude). Every
// length comes from the node, so every read is bounds-checked: a short or
// garbled stream is an error, never a panic or a silently short file.
type frames struct {
	b   []byte
	off int
	// marker is the line the script printed after the S record's
	// contents (build): a file that changed size under the read moves it.
	marker string
}

// line returns the bytes up to the next newline, without it.
func (f *frames) line() (string, error) {
	i := bytes.IndexByte(f.b[f.off:], '\n')
	if i < 0 {
		return "", fmt.Errorf("at byte %d: missing end of line", f.off)
	}
	s := string(f.b[f.off : f.off+i])
	f.off += i + 1
	return s, nil
}

// take returns the next n bytes.
func (f *frames) take(n int) ([]byte, error) {
	if n < 0 || n > len(f.b)-f.off {
		return nil, fmt.Errorf("at byte %d: want %d bytes, %d left", f.off, n, len(f.b)-f.off)
	}
	out := f.b[f.off : f.off+n : f.off+n]
	f.off += n
	return out, nil
}

// header reads a record header and checks its field count.
func (f *frames) header() ([]string, error) {
	l, err := f.line()
	if err != nil {
		return nil, err
	}
	fields := strings.Split(l, " ")
	want := map[string]int{"F": 3, "P": 2, "S": 1, "M": 3, "C": 3, "O": 3, "X": 3, "L": 1, "Z": 1}
	n, ok := want[fields[0]]
	if !ok {
		return nil, fmt.Errorf("at byte %d: unknown record %q", f.off-len(l)-1, l)
	}
	if fields[0] == "F" && len(fields) == 4 && fields[2] == "E" {
		n = 4
	}
	if len(fields) != n {
		return nil, fmt.Errorf("at byte %d: malformed record %q", f.off-len(l)-1, l)
	}
	return fields, nil
}

// num parses a non-negative decimal field.
func num(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return n, nil
}

// readFile reads the rest of an F or P record whose header is h. A present
// file (P) gets its metadata and content later, from readStats.
func (f *frames) readFile(h []string) (*transport.FileInfo, error) {
	n, err := num(h[1])
	if err != nil {
		return nil, fmt.Errorf("file record: %w", err)
	}
	name, err := f.take(n)
	if err != nil {
		return nil, fmt.Errorf("file record name: %w", err)
	}
	fi := &transport.FileInfo{Path: string(name)}
	if h[0] == "P" {
		fi.Exists = true
		return fi, nil
	}
	switch h[2] {
	case "0":
		return fi, nil
	case "E":
		n, err := num(h[3])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fi.Path, err)
		}
		msg, err := f.take(n)
		if err != nil {
			return nil, fmt.Errorf("%s: error text: %w", fi.Path, err)
		}
		return nil, &ReadError{Path: fi.Path, Msg: strings.TrimSpace(string(msg))}
	default:
		return nil, fmt.Errorf("%s: bad file state %q", fi.Path, h[2])
	}
}

// answer is what a Query, Stage or Exec script printed, record by record.
type answer struct {
	files   []*transport.FileInfo // F and P records, in order
	matches []match               // M records
	cmds    []*transport.CmdResult
	// failed is the X record of a stage file that could not be written.
	failed *failure
}

type match struct {
	glob int
	name string
}

type failure struct {
	index int
	msg   string
}

// readAnswer reads records up to Z: nCmds is how many commands the script
// ran.
func (f *frames) readAnswer(nCmds int) (*answer, error) {
	return f.readAnswerSome(nCmds, nCmds)
}

// readAnswerSome is readAnswer for a script that ran the first required of
// nCmds commands and may have skipped the rest (an Exec's Then, after a
// command that failed); a skipped command's result is nil.
func (f *frames) readAnswerSome(nCmds, required int) (*answer, error) {
	a := &answer{cmds: make([]*transport.CmdResult, nCmds)}
	var present []*transport.FileInfo
	var order []int
	stats := false
	for {
		hdr, err := f.header()
		if err != nil {
			return nil, err
		}
		if stats && hdr[0] != "Z" {
			return nil, fmt.Errorf("%s record after the stat record", hdr[0])
		}
		switch hdr[0] {
		case "F", "P":
			fi, err := f.readFile(hdr)
			if err != nil {
				return nil, err
			}
			a.files = append(a.files, fi)
			if fi.Exists {
				present = append(present, fi)
			}
		case "M":
			gi, name, err := f.readText(hdr)
			if err != nil {
				return nil, err
			}
			a.matches = append(a.matches, match{gi, name})
		case "C":
			i, rc, err := f.readCmd(hdr)
			if err != nil {
				return nil, err
			}
			if i >= nCmds || a.cmds[i] != nil {
				return nil, fmt.Errorf("result for command %d of %d", i, nCmds)
			}
			a.cmds[i] = &transport.CmdResult{ExitCode: rc}
			order = append(order, i)
		case "X":
			i, msg, err := f.readText(hdr)
			if err != nil {
				return nil, err
			}
			a.failed = &failure{i, msg}
		case "S":
			stats = true
			if err := f.readStats(present, a.cmds, order); err != nil {
				return nil, err
			}
		case "Z":
			if err := f.end(); err != nil {
				return nil, err
			}
			if !stats && (len(present) > 0 || len(order) > 0) {
				return nil, fmt.Errorf("no stat record")
			}
			if a.failed == nil {
				for i, c := range a.cmds[:required] {
					if c == nil {
						return nil, fmt.Errorf("no result for command %d", i)
					}
				}
			}
			return a, nil
		default:
			return nil, fmt.Errorf("unexpected %s record", hdr[0])
		}
	}
}

// readStats reads the body of an S record: two stat lines for each present
// file (the size of the copy that was read, then the path's own metadata)
// and for each command in order (its output, then its error), then the
// contents of all of them and the script's marker line (f.marker). A marker out of
// place means a file printed directly changed size under the read
// (errTorn).
func (f *frames) readStats(present []*transport.FileInfo, cmds []*transport.CmdResult, order []int) error {
	sizes := make([]int, len(present))
	for i, fi := range present {
		copyLine, err := f.line()
		if err != nil {
			return fmt.Errorf("%s: size: %w", fi.Path, err)
		}
		metaLine, err := f.line()
		if err != nil {
			return fmt.Errorf("%s: metadata: %w", fi.Path, err)
		}
		if sizes[i], err = num(strings.SplitN(copyLine, " ", 2)[0]); err != nil {
			return fmt.Errorf("%s: size: %w", fi.Path, err)
		}
		meta := strings.Split(metaLine, " ")
		if len(meta) != 6 {
			return fmt.Errorf("%s: malformed metadata %q", fi.Path, metaLine)
		}
		raw, err := strconv.ParseUint(meta[1], 16, 32)
		if err != nil {
			return fmt.Errorf("%s: mode %q: %w", fi.Path, meta[1], err)
		}
		fi.Mode = fileMode(uint32(raw))
		fi.IsDir = fi.Mode.IsDir()
		if fi.UID, err = num(meta[2]); err != nil {
			return fmt.Errorf("%s: uid: %w", fi.Path, err)
		}
		if fi.GID, err = num(meta[3]); err != nil {
			return fmt.Errorf("%s: gid: %w", fi.Path, err)
		}
		fi.Owner, fi.Group = knownName(meta[4]), knownName(meta[5])
	}
	outs := make([]int, 2*len(order))
	for k := range outs {
		l, err := f.line()
		if err != nil {
			return fmt.Errorf("command %d: output size: %w", order[k/2], err)
		}
		if outs[k], err = num(strings.SplitN(l, " ", 2)[0]); err != nil {
			return fmt.Errorf("command %d: output size: %w", order[k/2], err)
		}
	}
	for i, fi := range present {
		var err error
		if fi.Content, err = f.take(sizes[i]); err != nil {
			return fmt.Errorf("%s: content: %w", fi.Path, errTorn)
		}
	}
	for k, i := range order {
		var err error
		if cmds[i].Stdout, err = f.take(outs[2*k]); err != nil {
			return fmt.Errorf("command %d: stdout: %w", i, errTorn)
		}
		if cmds[i].Stderr, err = f.take(outs[2*k+1]); err != nil {
			return fmt.Errorf("command %d: stderr: %w", i, errTorn)
		}
	}
	if l, err := f.line(); err != nil || l != f.marker {
		return errTorn
	}
	return nil
}

// knownName maps stat's placeholder for an id without a name to "".
func knownName(s string) string {
	if s == "UNKNOWN" {
		return ""
	}
	return s
}

// readCmd reads a C record's header: the command's index and exit code
// (its output comes in the S record).
func (f *frames) readCmd(h []string) (int, int, error) {
	i, err := num(h[1])
	if err != nil {
		return 0, 0, fmt.Errorf("command record: %w", err)
	}
	rc, err := strconv.Atoi(h[2])
	if err != nil {
		return 0, 0, fmt.Errorf("command %d: exit code %q", i, h[2])
	}
	return i, rc, nil
}

// readText reads the length-framed text of an O or X record.
func (f *frames) readText(h []string) (int, string, error) {
	i, err := num(h[1])
	if err != nil {
		return 0, "", fmt.Errorf("%s record: %w", h[0], err)
	}
	n, err := num(h[2])
	if err != nil {
		return 0, "", fmt.Errorf("%s record %d: %w", h[0], i, err)
	}
	b, err := f.take(n)
	if err != nil {
		return 0, "", fmt.Errorf("%s record %d: %w", h[0], i, err)
	}
	return i, string(b), nil
}

// end checks that Z was the last thing printed.
func (f *frames) end() error {
	if f.off != len(f.b) {
		return fmt.Errorf("%d unexpected bytes after the end record", len(f.b)-f.off)
	}
	return nil
}

// fileMode converts a raw st_mode as printed by stat %f.
func fileMode(raw uint32) fs.FileMode {
	m := fs.FileMode(raw & 0o777)
	if raw&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if raw&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if raw&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch raw & 0o170000 {
	case 0o040000:
		m |= fs.ModeDir
	case 0o120000:
		m |= fs.ModeSymlink
	case 0o010000:
		m |= fs.ModeNamedPipe
	case 0o140000:
		m |= fs.ModeSocket
	case 0o020000:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		m |= fs.ModeDevice
	}
	return m
}

// chmodArg renders the permission bits of m for chmod, "" for 0 (keep).
func chmodArg(m fs.FileMode) string {
	if m == 0 {
		return ""
	}
	bits := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return fmt.Sprintf("%04o", bits)
}

// ReadError is a path Query found but could not read. It fails the whole
// Query: a module must not plan from a file it could not see.
type ReadError struct {
	Path string
	Msg  string
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("read %s: %s", e.Path, e.Msg)
}

// OpError is an Apply op that failed on the node. Ops before it completed;
// ops after it were not attempted.
type OpError struct {
	Index  int
	Op     transport.Op
	Stderr string
}

func (e *OpError) Error() string {
	target := e.Op.Path
	if e.Op.Kind == transport.OpMove {
		target = e.Op.From + " -> " + e.Op.Path
	}
	return fmt.Sprintf("op %d (%s %s): %s", e.Index, e.Op.Kind, target, e.Stderr)
}
