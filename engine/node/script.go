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

// prelude is the shell library every script is built on. Names start with
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
const prelude = `_nc_in() {
	_nc_n=0
	while IFS= read -r _nc_l; do
		[ "$_nc_l" = "$1" ] && return 0
		_nc_n=$((_nc_n + 1))
		[ "$_nc_n" -gt 300 ] && break
	done
	echo 'nodeconverge: input marker not found (the shell read further ahead than the filler)' >&2
	exit 112
}
_nc_blob() {
	head -c "$1" > "$2" || { echo "nodeconverge: read $1 bytes of input failed" >&2; exit 113; }
}
_nc_end() {
	IFS= read -r _nc_l
	[ "$_nc_l" = "$1" ] || { echo 'nodeconverge: input truncated' >&2; exit 114; }
}
_nc_size() {
	stat -c %s -- "$@" || { echo "nodeconverge: stat $*" >&2; exit 115; }
}
_nc_copy() {
	_nc_c=$T/c$1
	if [ ! -e "$2" ]; then
		printf 'F %d 0\n%s' "${#2}" "$2"
		return 1
	fi
	if [ -f "$2" ]; then
		case $_nc_qd:$2 in
		1:/proc/* | 1:/sys/* | 1:*/proc/* | 1:*/sys/*) ;;
		1:*) [ ! -r "$2" ] || _nc_c=$2 ;;
		esac
		[ "$_nc_c" = "$2" ] || cat -- "$2" > "$_nc_c" 2> "$T/e" || {
			[ -n "$3" ] && return 1
			_nc_ferr "$2"
			return 2
		}
	else
		[ -z "$3" ] || return 1
		: > "$_nc_c" || exit 116
	fi
	printf 'P %d\n%s' "${#2}" "$2"
}
_nc_ferr() {
	printf 'F %d E %d\n%s' "${#1}" "$(_nc_size "$T/e")" "$1"
	cat -- "$T/e"
}
_nc_emit() {
	_nc_n=0
	while [ "$_nc_n" -lt "$_nc_nc" ]; do
		eval "set -- \"\$@\" \"\$_nc_o$_nc_n\" \"\$_nc_e$_nc_n\""
		_nc_n=$((_nc_n + 1))
	done
	[ "$#" -gt 0 ] || return 0
	stat -L -c '%s %f %u %g %U %G' -- "$@" > "$T/st" || exit 118
	printf 'S\n'
	_nc_n=$((($# - 2 * _nc_nc) / 2))
	while [ "$_nc_n" -gt 0 ]; do
		set -- "$@" "$1"
		shift 2
		_nc_n=$((_nc_n - 1))
	done
	_nc_n=$((2 * _nc_nc))
	while [ "$_nc_n" -gt 0 ]; do
		set -- "$@" "$1"
		shift
		_nc_n=$((_nc_n - 1))
	done
	if cat -- "$T/st" "$@"; then
		printf '%s\n' "$_nc_qm"
	elif [ "$_nc_qd" != 1 ]; then
		exit 118
	fi
}
_nc_out() {
	eval "_nc_o$1=\$2 _nc_e$1=\$3"
	_nc_nc=$(($1 + 1))
	printf 'C %d %d\n' "$1" "$4"
}
_nc_cmd() {
	_nc_i=$1
	_nc_input=$2
	_nc_k=$3
	shift 3
	case $_nc_k in
	sh) sh -c "$1" < "$_nc_input" > "$T/o$_nc_i" 2> "$T/e$_nc_i" ;;
	ev)
		_nc_ev=$1
		(
			IFS=' 	
'
			set --
			eval "$_nc_ev"
		) < "$_nc_input" > "$T/o$_nc_i" 2> "$T/e$_nc_i"
		;;
	*) ( command "$@" ) < "$_nc_input" > "$T/o$_nc_i" 2> "$T/e$_nc_i" ;;
	esac
	_nc_rc=$?
	_nc_out "$_nc_i" "$T/o$_nc_i" "$T/e$_nc_i" "$_nc_rc"
}
_nc_memo() {
	_nc_i=$1
	_nc_mn=$2
	shift 2
	_nc_mb=$1
	case $_nc_mb in
	*/*) ;;
	*) _nc_mb=$(command -v -- "$_nc_mb") || _nc_mb= ;;
	esac
	_nc_mk=
	case $_nc_mb in
	/*) _nc_mk=$(stat -L -c '%d.%i.%s.%Y.%Z' -- "$_nc_mb" 2> /dev/null) || _nc_mk= ;;
	esac
	_nc_mp=$_nc_sdir/memo/$_nc_mn
	if [ -n "$_nc_mk" ] && [ -f "$_nc_mp.$_nc_mk" ]; then
		_nc_out "$_nc_i" "$_nc_mp.$_nc_mk" /dev/null 0
		return 0
	fi
	_nc_cmd "$_nc_i" /dev/null argv "$@"
	[ -n "$_nc_mk" ] && [ "$_nc_rc" = 0 ] && [ ! -s "$T/e$_nc_i" ] || return 0
	for _nc_f in "$_nc_mp".*; do
		[ ! -e "$_nc_f" ] || { rm -f -- "$_nc_mp".* || return 0; break; }
	done
	if _nc_pdir "$_nc_sdir/memo" && mv -f -- "$T/o$_nc_i" "$_nc_mp.$_nc_mk" 2> /dev/null; then
		eval "_nc_o$_nc_i=\$_nc_mp.\$_nc_mk"
	fi
	return 0
}
_nc_fail() {
	printf 'X %d %d\n' "$1" "$(_nc_size "$T/e")"
	cat -- "$T/e"
	printf 'Z\n'
	exit 0
}
_nc_ok() {
	printf 'O %d %d\n%s' "$1" "${#bk}" "$bk"
}
_nc_sblob() {
	umask "$4"
	head -c "$2" 2> "$T/e" > "$SCRATCH/$3"
	_nc_r=$?
	umask 022
	[ "$_nc_r" = 0 ] || _nc_fail "$1"
	[ -z "$5" ] || chmod -- "$5" "$SCRATCH/$3" 2> "$T/e" || _nc_fail "$1"
}
_nc_sync() {
	set -- "$@" ${_nc_pb:+"$_nc_pb"} ${_nc_pm:+"$_nc_pm"} ${_nc_pd1:+"$_nc_pd1"} ${_nc_pd2:+"$_nc_pd2"}
	_nc_pb=
	_nc_pm=
	_nc_pd1=
	_nc_pd2=
	[ "$#" -gt 0 ] || return 0
	sync -- "$@" 2> /dev/null || sync
}
_nc_later() {
	if [ -n "$_nc_pd1" ] && [ -n "$_nc_pd2" ]; then _nc_sync; fi
	if [ -z "$_nc_pd1" ]; then _nc_pd1=$1; else _nc_pd2=$1; fi
}
_nc_dir() {
	_nc_d=${1%/*}
	[ -n "$_nc_d" ] || _nc_d=/
}
_nc_pdir() {
	[ ! -d "$1" ] || return 0
	umask 077
	mkdir -p -- "$1"
	_nc_r=$?
	umask 022
	return "$_nc_r"
}
_nc_backup() {
	bk=$BK$1
	if [ ! -e "$bk" ] && [ ! -L "$bk" ]; then
		_nc_pdir "${bk%/*}" || return 1
		cp -a -- "$1" "$bk" || { _nc_wfail "back up $1 to $bk" "${bk%/*}"; return 1; }
		[ -z "$_nc_pb" ] || _nc_sync
		_nc_pb=$bk
	fi
}
_nc_wfail() {
	_nc_wa=$(df -P -- "$2" 2> /dev/null | { read -r _nc_wl; IFS=' ' read -r _nc_wl _nc_wl _nc_wl _nc_wa _nc_wl; echo "$_nc_wa"; })
	if [ "$_nc_wa" = 0 ]; then
		echo "nodeconverge: $1: no space left on device (the file system of $2 is full)" >&2
	else
		echo "nodeconverge: $1 failed" >&2
	fi
}
_nc_attrs() {
	if [ -e "$2" ] && { [ ! -O "$2" ] || [ ! -G "$2" ] || [ -g "${1%/*}" ]; }; then
		chown --reference="$2" -- "$1" || return 1
	fi
	if [ -n "$4" ]; then chown -- "$4" "$1" || return 1; fi
	if [ -n "$5" ]; then chgrp -- "$5" "$1" || return 1; fi
	if [ -n "$3" ]; then
		[ -n "$6" ] || chmod -- "$3" "$1"
	elif [ -e "$2" ]; then
		chmod --reference="$2" -- "$1"
	fi
}
_nc_q() {
	_nc_qr=$1
	_nc_qv=
	while :; do
		case $_nc_qr in
		*\'*)
			_nc_qv=$_nc_qv${_nc_qr%%\'*}\'\\\'\'
			_nc_qr=${_nc_qr#*\'}
			;;
		*) break ;;
		esac
	done
	_nc_qv=\'$_nc_qv$_nc_qr\'
}
_nc_rec() {
	case $2 in "$SD"/*) return 0 ;; esac
	case $2$3$5 in
	*'
'*)
		echo "nodeconverge: $2: a path with a newline cannot be recorded in the run manifest" >&2
		return 1
		;;
	esac
	_nc_pdir "$BK" || return 1
	_nc_q "$2"
	_nc_ml="$1 $_nc_qv"
	_nc_q "$3"
	_nc_ml="$_nc_ml $_nc_qv $4"
	_nc_q "$5"
	printf '%s\n' "$_nc_ml $_nc_qv" >> "$BK/MANIFEST" 2> /dev/null || {
		_nc_wfail "record the op in $BK/MANIFEST" "$BK"
		return 1
	}
	_nc_pm=$BK/MANIFEST
}
_nc_write() {
	bk=
	_nc_p=$1
	if [ -L "$_nc_p" ]; then
		_nc_p=$(readlink -f -- "$_nc_p") || { echo "$1: cannot resolve the symlink" >&2; return 1; }
	fi
	if [ -e "$_nc_p" ] && [ ! -f "$_nc_p" ]; then
		echo "$_nc_p exists and is not a regular file" >&2
		return 1
	fi
	_nc_dir "$_nc_p"
	[ -d "$_nc_d" ] || mkdir -p -m 0755 -- "$_nc_d" || return 1
	_nc_e=0
	[ ! -e "$_nc_p" ] || _nc_e=1
	if [ "$6" = 1 ] && [ "$_nc_e" = 1 ]; then _nc_backup "$_nc_p" || return 1; fi
	_nc_rec write "$_nc_p" "" "$_nc_e" "$bk" || return 1
	_nc_dir "$_nc_p"
	_nc_wn=$((_nc_wn + 1))
	_nc_t=$_nc_d/.nodeconverge.$_nc_rnd.$_nc_wn
	_nc_m=$3
	_nc_u=$7
	umask "${_nc_u:-022}"
	set -C
	{ true > "$_nc_t"; } 2> /dev/null
	_nc_r=$?
	set +C
	umask 022
	if [ "$_nc_r" != 0 ]; then
		_nc_t=
		_nc_t=$(mktemp -- "$_nc_d/.nodeconverge.XXXXXXXX") || return 1
		# mktemp makes 0600 whatever the umask: chmod gives the mode.
		_nc_u=
		[ -n "$_nc_m" ] || [ -e "$_nc_p" ] || _nc_m=0644
	fi
	if cat -- "$2" > "$_nc_t" && _nc_attrs "$_nc_t" "$_nc_p" "$_nc_m" "$4" "$5" "$_nc_u" &&
		_nc_sync "$_nc_t" && mv -f -T -- "$_nc_t" "$_nc_p"; then
		_nc_t=
		_nc_later "$_nc_d"
		return 0
	fi
	rm -f -- "$_nc_t"
	_nc_t=
	return 1
}
_nc_move() {
	bk=
	if [ ! -e "$2" ] && [ ! -L "$2" ]; then
		echo "$2: no such file or directory" >&2
		return 1
	fi
	_nc_dir "$1"
	[ -d "$_nc_d" ] || mkdir -p -m 0755 -- "$_nc_d" || return 1
	_nc_e=0
	if [ -e "$1" ] || [ -L "$1" ]; then _nc_e=1; fi
	_nc_db=
	if [ "$3" = 1 ]; then
		if [ "$_nc_e" = 1 ]; then _nc_backup "$1" || return 1; _nc_db=$bk; fi
		_nc_backup "$2" || return 1
	fi
	_nc_rec move "$1" "$2" "$_nc_e" "$_nc_db" || return 1
	_nc_sync
	mv -f -T -- "$2" "$1" || return 1
	_nc_dir "$2"
	_nc_later "$_nc_d"
	_nc_dir "$1"
	_nc_later "$_nc_d"
}
_nc_remove() {
	bk=
	if [ ! -e "$1" ] && [ ! -L "$1" ]; then return 0; fi
	if [ -d "$1" ] && [ ! -L "$1" ]; then
		echo "$1 is a directory; refusing to remove it" >&2
		return 1
	fi
	if [ "$2" = 1 ]; then _nc_backup "$1" || return 1; fi
	_nc_rec remove "$1" "" 1 "$bk" || return 1
	_nc_sync
	rm -f -- "$1" || return 1
	_nc_dir "$1"
	_nc_later "$_nc_d"
}
_nc_keep() {
	bk=$BK$1
	if [ ! -f "$1" ]; then
		echo "$1: not a regular file; cannot keep its value" >&2
		return 1
	fi
	if [ ! -e "$bk" ]; then
		_nc_pdir "${bk%/*}" || return 1
		cat -- "$1" > "$bk.new" && _nc_sync "$bk.new" && mv -f -- "$bk.new" "$bk" || {
			rm -f -- "$bk.new"
			_nc_wfail "keep $1 in $bk" "${bk%/*}"
			return 1
		}
	fi
	_nc_rec keep "$1" "" 1 "$bk"
}
_nc_prune() {
	_nc_pd=$1
	_nc_pk=$2
	shift 2
	_nc_n=0
	for _nc_f in "$_nc_pd"/*; do [ -d "$_nc_f" ] && _nc_n=$((_nc_n + 1)); done
	for _nc_f in "$_nc_pd"/*; do
		[ "$_nc_n" -le "$_nc_pk" ] && break
		[ -d "$_nc_f" ] || continue
		_nc_kp=0
		for _nc_r in "$@"; do [ "${_nc_f##*/}" = "$_nc_r" ] && _nc_kp=1; done
		[ "$_nc_kp" = 1 ] && continue
		rm -rf -- "$_nc_f" || return 1
		_nc_n=$((_nc_n - 1))
	done
}
`

// mainHead and mainTail wrap a script's body. LC_ALL=C makes globs sort
// bytewise and ${#x} count bytes; IFS is emptied so an unquoted glob
// pattern is expanded but never split.
//
// The private directory T (staged candidates, copies of the files read,
// command output: it may hold credentials) lives under the state directory
// ($_nc_td, see scratchPrelude), never in the node's shared /tmp. The EXIT
// trap removes it however the script ends; the signal traps turn a signal
// into an exit so the EXIT trap runs. PIPE is among them: when the
// controller dies, sshd closes the session's pipes without signalling the
// script, and the script learns of it at its next write. The EXIT trap also
// removes a write's temporary file ($_nc_t) when a signal arrives between
// mktemp and rename. A script killed outright (SIGKILL, a reboot) leaves T
// behind; the next script on the node removes it (_nc_sweep).
const mainHead = `_nc_main() {
LC_ALL=C
export LC_ALL
umask 022
T=
_nc_t=
_nc_pb=
_nc_pm=
_nc_pd1=
_nc_pd2=
_nc_nc=0
_nc_qd=0
_nc_wn=0
trap '[ -z "$_nc_pd1" ] || _nc_sync; [ -z "$T" ] || rm -rf -- "$T"; [ -z "$_nc_t" ] || rm -f -- "$_nc_t"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM
_nc_scratch || exit 111
IFS=
`

const mainTail = `_nc_sync
printf 'Z\n'
}
`

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
func (s *script) build(stateDir string, holder int, filler bool) (text string, stdin []byte, answer string, err error) {
	var t strings.Builder
	t.WriteString(prelude)
	t.WriteString(scratchPrelude)
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
