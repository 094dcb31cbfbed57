package node

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"nodeconverge/engine/transport"
)

// How data reaches a remote script.
//
// Conn.Run feeds `sh -s` the script and then stdin on one stream. A shell
// reading its script from a pipe may read ahead of the command it is about to
// run (dash reads up to 8 KiB at a time), so bytes meant for `head -c` can
// vanish into the shell's own buffer. The script therefore never relies on
// where the shell stopped reading: it is one function definition followed by
// a single line that calls it, so the shell has parsed everything before
// anything runs; the data is preceded by filler longer than any read-ahead and
// a random marker line, and the script skips lines up to the marker before it
// reads length-framed blobs with `head -c`. A random end marker after the
// blobs proves none was short. A shell that reads further ahead than the
// filler is detected (the marker is missing) instead of corrupting data.
const (
	fillerLines    = 256 // 256 lines of 64 bytes: 16 KiB, twice dash's buffer
	fillerLineSize = 64
)

// prelude (sh/prelude.sh) is the shell library every script is built on. Names start with
// _nc_ so Argv commands and user scripts do not collide with them.
//
// Starting a process costs milliseconds on a small node, so a Query does
// not stat and print each file on its own: one stat prints the metadata of
// every file and one cat prints them all, framed by the sizes stat gave.
// Files whose size stat cannot tell (/proc and /sys report 0) and files the
// shell cannot read (their cat error is the answer) are copied first (one
// cat each), and their copies are what is measured and printed. A random
// marker after the contents proves the sizes held: a file that changed
// between stat and cat shifts it, and the Query is read again with every
// file copied ($_nc_qd=0), which is exact.
//
// A backup copy and a manifest line must be on disk before the live path
// they describe changes, not each at once: _nc_backup and _nc_rec leave
// theirs pending (_nc_pb, _nc_pm), and the next _nc_sync, which every op
// calls before its live change and the script's end calls too, syncs them
// together with its own path. A change's directories (the rename, move or
// remove that must itself be durable) are left pending the same way
// (_nc_later): the next op's sync before its own live change carries them,
// so each live change still follows the durable record of every change
// before it, and the script's end (or its EXIT trap, on a failure) syncs
// what is left. A sync is a process, and a converge writes a handful of
// files per node: n ops cost n+1 syncs, not 2n.
//
// A failed write into the backup area is explained by _nc_wfail, which
// names the path and says when its file system is full: dash's printf
// reports every write error as "I/O error".
//
// Records written to stdout, parsed by frames:
//
//	F <namelen> 0\n<name>                       path missing
//	F <namelen> E <errlen>\n<name><err>         path unreadable
//	P <namelen>\n<name>                         path present: its copy is in S
//	M <glob> <namelen>\n<name>                  glob match (an F or P follows)
//	C <cmd> <exit>\n                             command done (output in S)
//	S\n<stats><contents><marker>\n             after every other record but Z:
//	    2 stat lines per P (the copy read, then the path), 2 per C (output,
//	    error); then the content of every P's copy, then each C's output
//	    and error, in record order; then the script's marker line
//	O <op> <len>\n<backup path>                 op done
//	X <op> <len>\n<stderr>                      op failed (script ends)
//	L                                           the lock's records end (LockAndPrefetch)
//	Z                                           script completed
var prelude = shellLib(preludeSh)

// mainPrelude defines _nc_start and _nc_finish (sh/main.sh).
var mainPrelude = shellLib(mainSh)

// mainHead and mainTail wrap a script's body (sh/main.sh says what they
// set up and end).
const mainHead = "_nc_main() {\n_nc_start\n"

// mainTail ends the body that mainHead starts.
const mainTail = "_nc_finish\n}\n"

// mainCall must be the script's last line, and a single line, so the shell
// has read all of the script before anything in it reads stdin.
const mainCall = "_nc_main; exit $?\n"

// script builds one remote script and the stdin it needs.
type script struct {
	// pre runs before the blobs are read (it makes the directories
	// blobAt writes into), body after.
	pre   strings.Builder
	body  strings.Builder
	blobs []blob
	// reading says the body has started its list of files read.
	reading bool
}

// blob is data for the script's stdin and the line that reads it: a
// format whose one %d is the byte count.
type blob struct {
	data []byte
	read string
}

// blob queues data for the script's stdin and returns a shell word naming
// the file it will be in when the body runs.
func (s *script) blob(data []byte) string {
	w := fmt.Sprintf(`"$T/d%d"`, len(s.blobs))
	s.blobs = append(s.blobs, blob{data, "_nc_blob %d " + w})
	return w
}

// blobAt queues data that read, a line with one %d for the byte count,
// reads from stdin straight to where the body wants it: a staged file
// written in place, not copied and moved, costs a node no process but its
// head.
func (s *script) blobAt(data []byte, read string) {
	s.blobs = append(s.blobs, blob{data, read})
}

// stdinWord returns the shell word for a command's standard input.
func (s *script) stdinWord(data []byte) string {
	if data == nil {
		return "/dev/null"
	}
	return s.blob(data)
}

// readFiles appends a read of each path with _nc_copy, which prints its F
// or P record; soft leaves out a path that is not a readable regular file
// instead of failing the script with its error (Exec's read-back, after a
// command that already ran). Present paths collect in the positional
// parameters as copy/path pairs for _nc_emit (a file printed directly is
// its own copy); see prelude.
func (s *script) readFiles(soft bool, paths []string) error {
	flag := ""
	if soft {
		flag = " soft"
	}
	if !s.reading {
		// The first read of the script starts the list.
		s.reading = true
		s.line("set --")
		s.line("_nc_k=0")
	}
	for _, p := range paths {
		if err := checkQueryPath(p); err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		s.line(`_nc_k=$((_nc_k + 1)); _nc_copy "$_nc_k"`, transport.ShellQuote(p)+flag,
			`&& set -- "$@" "$_nc_c"`, transport.ShellQuote(p))
	}
	return nil
}

// line appends one command to the body; words must already be shell words.
func (s *script) line(words ...string) {
	s.body.WriteString(strings.Join(words, " "))
	s.body.WriteByte('\n')
}

// cmd appends a run of c that prints a C record with index i. A Script
// runs in a subshell of the script's own shell (no exec: a process less per
// command) unless fresh asks for a new `sh -c`, as Exec does for commands
// a user wrote, which must not see the script's variables.
func (s *script) cmd(i int, c transport.Cmd, fresh bool) error {
	if err := checkCmd(c); err != nil {
		return err
	}
	if c.Memo {
		words := []string{"_nc_memo", fmt.Sprint(i), memoName(c.Argv)}
		for _, a := range c.Argv {
			words = append(words, transport.ShellQuote(a))
		}
		s.line(words...)
		return nil
	}
	in := s.stdinWord(c.Stdin)
	words := []string{"_nc_cmd", fmt.Sprint(i), in}
	if len(c.Argv) > 0 {
		words = append(words, "argv")
		for _, a := range c.Argv {
			words = append(words, transport.ShellQuote(a))
		}
	} else {
		kind := "ev"
		if fresh {
			kind = "sh"
		}
		words = append(words, kind, transport.ShellQuote(c.Script))
	}
	s.line(words...)
	return nil
}

// build returns the script text, its stdin, and the marker that ends the
// script's S record (frames.marker).
// stateDir is the node's state directory, under which the script's private
// directory is made. holder, when not 0, is the process the connection's
// life is tied to (HolderConn); 0 lets the node find its sshd. filler
// guards the data against a shell that reads its script from the same
// stdin (see ExactStdinConn); the start marker is checked either way.
//
// noMemo stops Memo commands from keeping their output on the node
// (HostOptions.NoMemoWrites).
func (s *script) build(stateDir string, holder int, filler, noMemo bool) (text string, stdin []byte, answer string, err error) {
	var t strings.Builder
	t.WriteString(prelude)
	t.WriteString(scratchPrelude)
	t.WriteString(mainPrelude)
	rnd := make([]byte, 8)
	if _, err := rand.Read(rnd); err != nil {
		return "", nil, "", fmt.Errorf("random name: %w", err)
	}
	// The marker that ends the S record (_nc_emit): the caller checks it.
	if answer, err = marker("NCQ"); err != nil {
		return "", nil, "", err
	}
	fmt.Fprintf(&t, "_nc_qm=%s\n", answer)
	fmt.Fprintf(&t, "_nc_rnd=%s\n", hex.EncodeToString(rnd))
	fmt.Fprintf(&t, "_nc_sdir=%s\n", transport.ShellQuote(stateDir))
	fmt.Fprintf(&t, "_nc_td=%s\n", transport.ShellQuote(path.Join(stateDir, ScratchDirName)))
	if holder > 0 {
		fmt.Fprintf(&t, "_nc_hold=%d\n", holder)
	}
	if noMemo {
		t.WriteString("_nc_nomemo=1\n")
	}
	t.WriteString(mainHead)
	t.WriteString(s.pre.String())
	var in bytes.Buffer
	if len(s.blobs) > 0 {
		start, err := marker("NCDATA")
		if err != nil {
			return "", nil, "", err
		}
		end, err := marker("NCEND")
		if err != nil {
			return "", nil, "", err
		}
		fmt.Fprintf(&t, "_nc_in %s\n", start)
		if filler {
			line := strings.Repeat("#", fillerLineSize-1) + "\n"
			for range fillerLines {
				in.WriteString(line)
			}
		}
		in.WriteString(start + "\n")
		for _, b := range s.blobs {
			fmt.Fprintf(&t, b.read+"\n", len(b.data))
			in.Write(b.data)
		}
		fmt.Fprintf(&t, "_nc_end %s\n", end)
		in.WriteString(end + "\n")
	}
	t.WriteString(s.body.String())
	t.WriteString(mainTail)
	t.WriteString(mainCall)
	return t.String(), in.Bytes(), answer, nil
}

// marker returns a random line no content will contain by accident.
func marker(prefix string) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random marker: %w", err)
	}
	return prefix + "-" + hex.EncodeToString(b), nil
}

// memoName names a Memo command's kept outputs on the node: a hash of its
// arguments, so two commands of one program (--version, --help) keep apart.
// The program itself is in the key by its file's identity, however Argv[0]
// names it.
func memoName(argv []string) string {
	h := sha256.New()
	for _, a := range argv[1:] {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// checkCmd rejects commands a shell cannot carry.
func checkCmd(c transport.Cmd) error {
	if len(c.Argv) == 0 && c.Script == "" {
		return fmt.Errorf("command has neither Script nor Argv")
	}
	if c.Memo && (len(c.Argv) == 0 || c.Stdin != nil) {
		return fmt.Errorf("a Memo command needs Argv and no Stdin")
	}
	if err := checkNUL(c.Script); err != nil {
		return fmt.Errorf("command script: %w", err)
	}
	for _, a := range c.Argv {
		if err := checkNUL(a); err != nil {
			return fmt.Errorf("command argument %q: %w", a, err)
		}
	}
	return nil
}

// checkNUL rejects strings with NUL bytes: a shell word cannot hold one, and
// the shell would silently cut the string there.
func checkNUL(s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("contains a NUL byte")
	}
	return nil
}
