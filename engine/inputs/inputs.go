// Package inputs reads the files a run is given (playbooks, inventories,
// vars files, copy sources) with a bound on their size. Parsing YAML costs
// many times the size of its text in memory (a 50 MB playbook took 3 GB),
// so a file far larger than any real input is refused with an error
// naming it and the limit, before it is read, rather than taking the
// controller's memory.
package inputs

import (
	"fmt"
	"io"
	"os"
)

// The limits, each far above what a real input of its kind needs: a
// playbook or vars file of a few hundred KB is already large, and an
// inventory of 10,000 hosts with their variables fits in a few MB.
const (
	MaxPlaybook  = 4 << 20  // a playbook
	MaxVarsFile  = 4 << 20  // a vars file: group_vars, host_vars, -e @file
	MaxInventory = 32 << 20 // an inventory file
	MaxCopySrc   = 16 << 20 // a copy task's src: it is sent to, staged and diffed on every host
)

// TooLargeError says a file is over its limit; nothing of it was parsed.
// Its message leaves the path to the caller's wrapping ("read playbook
// PATH: too large: ...").
type TooLargeError struct {
	What  string // "playbook", "inventory", ...
	Path  string
	Size  int64 // the size; -1 when it was found by reading past the limit
	Limit int64
}

func (e *TooLargeError) Error() string {
	size := "more than that"
	if e.Size >= 0 {
		size = fmt.Sprintf("%d bytes", e.Size)
	}
	return fmt.Sprintf("too large: %s, over the limit of %s for a %s", size, human(e.Limit), e.What)
}

// human renders a limit in MiB when it is a whole number of them.
func human(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB (%d bytes)", n>>20, n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadFile reads path whole unless it holds more than limit bytes; what
// names the kind of file for the error. The size is checked before
// reading, and again while reading for files whose size stat does not
// tell (pipes, /proc).
func ReadFile(path, what string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, &TooLargeError{What: what, Path: path, Size: fi.Size(), Limit: limit}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{What: what, Path: path, Size: -1, Limit: limit}
	}
	return b, nil
}
