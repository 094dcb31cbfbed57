package module

import (
	"fmt"
	"path"
	"strings"

	"nodeconverge/engine/safetext"
)

// WritePath checks a path that a plan writes, moves or removes on a node.
// It is checked when the plan is made (check mode, the up-front plan of
// apply, a handler's plan), so a path rendered from a variable is refused
// before anything is written, and check mode says what apply would do.
//
// The rule: absolute, clean (no `.` or `..` component, no `//`, no
// trailing slash), not `/`, and no control character. A `..` is an error,
// not resolved: `/etc/containerd/certs.d/{{ registry }}/hosts.toml` with
// registry `../../../tmp/x` would write /tmp/x/hosts.toml, a file the task
// does not name; the message says where the write would go, so a path
// that is meant can be written as that. A control character (a newline
// above all) is refused as in host names: a node's run manifest records one
// path per line, and a printed path must not start a line of its own.
func WritePath(p string) error {
	if safetext.Line(p) != p {
		return fmt.Errorf("path %s holds a control character or bytes that are not UTF-8 (shown escaped)", safetext.Line(p))
	}
	if !path.IsAbs(p) {
		return fmt.Errorf("path %q is not absolute", p)
	}
	if p == "/" {
		return fmt.Errorf("path %q is the root directory", p)
	}
	if c := path.Clean(p); c != p {
		if strings.Contains(p+"/", "/../") {
			return fmt.Errorf("path %q leaves the directory it names: its `..` would put the write at %s (write that path if it is meant)", p, c)
		}
		return fmt.Errorf("path %q is not clean: it means %s (write it so)", p, c)
	}
	return nil
}

// CheckPaths checks every path p writes, moves or removes (WritePath),
// and names the first one refused with its action.
func CheckPaths(p *Plan) error {
	if p == nil {
		return nil
	}
	for _, f := range p.Files {
		if err := WritePath(f.Path); err != nil {
			return fmt.Errorf("planned %s: %w", f.Action, err)
		}
		if f.Action == Move {
			if err := WritePath(f.From); err != nil {
				return fmt.Errorf("planned move to %s: source: %w", f.Path, err)
			}
		}
	}
	return nil
}
