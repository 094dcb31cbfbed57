// Command measure runs one benchmark command and prints, as one JSON object,
// its wall time and the CPU time and peak RSS of its whole process tree.
//
// It makes itself a child subreaper, so processes that detach from the
// command (OpenSSH ControlPersist masters started by ansible-playbook) are
// reparented to it instead of to init: their CPU would otherwise never be
// charged to the run. When the command exits, the wall clock stops; any such
// leftover process is then sent SIGTERM and reaped, so its rusage is added to
// RUSAGE_CHILDREN before that is read.
//
// Usage: measure [-o FILE] -- CMD [ARG...]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>; the
// syscall package does not name it.
const prSetChildSubreaper = 36

// Result is one measured run.
type Result struct {
	// WallS is from start to the command's own exit, in seconds.
	WallS float64 `json:"wall_s"`
	// UserS and SysS are the CPU seconds of every reaped descendant.
	UserS float64 `json:"user_s"`
	SysS  float64 `json:"sys_s"`
	// MaxRSSKB is the largest resident set of any single descendant (as
	// /usr/bin/time reports it), in KiB.
	MaxRSSKB int64 `json:"maxrss_kb"`
	// Exit is the command's exit status (-1 when killed by a signal).
	Exit int `json:"exit"`
	// Leftovers counts detached descendants that had to be terminated.
	Leftovers int `json:"leftovers"`
}

func main() {
	out := flag.String("o", "", "write the JSON result to this file instead of stdout")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: measure [-o FILE] -- CMD [ARG...]")
		os.Exit(2)
	}
	res, err := run(flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "measure: %v\n", err)
		os.Exit(1)
	}
	b, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(os.Stderr, "measure: encode result: %v\n", err)
		os.Exit(1)
	}
	b = append(b, '\n')
	if *out == "" {
		if _, err := os.Stdout.Write(b); err != nil {
			fmt.Fprintf(os.Stderr, "measure: write result: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "measure: %v\n", err)
		os.Exit(1)
	}
}

func run(argv []string) (*Result, error) {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return nil, fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", e)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	res := &Result{}
	err := cmd.Wait()
	res.WallS = time.Since(start).Seconds()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Exit = ee.ExitCode()
	default:
		return nil, fmt.Errorf("wait for %s: %w", argv[0], err)
	}
	n, err := reapLeftovers()
	if err != nil {
		return nil, err
	}
	res.Leftovers = n
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return nil, fmt.Errorf("getrusage: %w", err)
	}
	res.UserS = tv(ru.Utime)
	res.SysS = tv(ru.Stime)
	res.MaxRSSKB = ru.Maxrss
	return res, nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// reapLeftovers terminates the processes reparented to us and waits for
// every child, so that their rusage is accounted. It returns how many it
// had to signal.
func reapLeftovers() (int, error) {
	kids, err := children(os.Getpid())
	if err != nil {
		return 0, err
	}
	for _, p := range kids {
		// A child may exit between the scan and the signal; ESRCH is fine.
		if err := syscall.Kill(p, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return 0, fmt.Errorf("signal leftover %d: %w", p, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.ECHILD):
			return len(kids), nil
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return 0, fmt.Errorf("wait4: %w", err)
		case p > 0:
			continue
		}
		if time.Now().After(deadline) {
			left, err := children(os.Getpid())
			if err != nil {
				return 0, err
			}
			for _, q := range left {
				if err := syscall.Kill(q, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					return 0, fmt.Errorf("kill leftover %d: %w", q, err)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// children lists the pids whose parent is ppid, from /proc/PID/stat.
func children(ppid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []int
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			// The process exited while we were scanning.
			continue
		}
		// The command name may contain spaces and parentheses; the
		// fields after the last ')' are fixed: state, ppid, ...
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		if err != nil {
			return nil, fmt.Errorf("parse pid in %s: %w", s, err)
		}
		out = append(out, pid)
	}
	return out, nil
}
