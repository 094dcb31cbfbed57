// Package lineinfile is Ansible's `lineinfile`: one line of a file is the
// task's, the rest of the file is left byte for byte as it was. It follows
// ansible.builtin.lineinfile line for line (regexp, search_string, line,
// insertafter/insertbefore with BOF/EOF, firstmatch, backrefs, state
// absent, create), so a file edited by either tool ends the same; the
// candidate is then validated on the node (validate), written atomically
// with a backup, and a second run plans nothing.
//
// Patterns are Python's `re` syntax as far as Go's RE2 runs it
// (edit.Regexp): a pattern with look-around is refused at load.
package lineinfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/edit"
)

func init() {
	module.Register(module.Registration{Name: "lineinfile", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// Args are ansible.builtin.lineinfile's arguments.
type Args struct {
	edit.Target  `yaml:",inline"`
	State        string  `yaml:"state"`
	Regexp       *string `yaml:"regexp"`
	Regex        *string `yaml:"regex"`
	SearchString *string `yaml:"search_string"`
	Line         *string `yaml:"line"`
	Value        *string `yaml:"value"`
	InsertAfter  *string `yaml:"insertafter"`
	InsertBefore *string `yaml:"insertbefore"`
	Backrefs     bool    `yaml:"backrefs"`
	Create       bool    `yaml:"create"`
	FirstMatch   bool    `yaml:"firstmatch"`

	re, ins *regexp.Regexp
}

// Validate checks the arguments as Ansible's argument spec does, and
// compiles the patterns so a bad one fails at load.
func (a *Args) Validate() error {
	if err := a.Target.Resolve(); err != nil {
		return err
	}
	if a.Regex != nil {
		if a.Regexp != nil {
			return errors.New("give regexp once (regex is its alias)")
		}
		a.Regexp, a.Regex = a.Regex, nil
	}
	if a.Value != nil {
		if a.Line != nil {
			return errors.New("give line once (value is its alias)")
		}
		a.Line, a.Value = a.Value, nil
	}
	switch {
	case a.State == "":
		a.State = "present"
	case a.State != "present" && a.State != "absent":
		return fmt.Errorf("state %q: one of present, absent", a.State)
	}
	switch {
	case a.InsertAfter != nil && a.InsertBefore != nil:
		return errors.New("parameters are mutually exclusive: insertbefore|insertafter")
	case a.Regexp != nil && a.SearchString != nil:
		return errors.New("parameters are mutually exclusive: regexp|search_string")
	case a.Backrefs && a.SearchString != nil:
		return errors.New("parameters are mutually exclusive: backrefs|search_string")
	}
	var err error
	if a.Regexp != nil {
		if a.re, err = edit.Regexp("regexp", *a.Regexp); err != nil {
			return err
		}
	}
	if a.State == "present" {
		switch {
		case a.Backrefs && a.Regexp == nil:
			return errors.New("regexp is required with backrefs=true")
		case a.Line == nil:
			return errors.New("line is required with state=present")
		}
		if a.InsertAfter == nil && a.InsertBefore == nil {
			eof := "EOF"
			a.InsertAfter = &eof
		}
		switch {
		case a.InsertAfter != nil && *a.InsertAfter != "BOF" && *a.InsertAfter != "EOF":
			a.ins, err = edit.Regexp("insertafter", *a.InsertAfter)
		case a.InsertBefore != nil && *a.InsertBefore != "BOF":
			a.ins, err = edit.Regexp("insertbefore", *a.InsertBefore)
		}
		return err
	}
	if a.Regexp == nil && a.SearchString == nil && a.Line == nil {
		return errors.New("one of line, search_string, or regexp is required with state=absent")
	}
	return nil
}

// Module implements module.Module for lineinfile.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

// Prefetch reads the file with the play's other reads.
func (Module) Prefetch(margs module.Args) transport.Query {
	return transport.Query{Files: []string{margs.(*Args).Path}}
}

// Check plans the edit.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	return edit.Plan(ctx, h, &a.Target, "backup", func(live edit.Live) (edit.Outcome, error) {
		if a.State == "absent" {
			return a.absent(live)
		}
		return a.present(live)
	})
}

// Apply writes the planned file.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	return module.ApplyFiles(ctx, h, p)
}

// lines splits content as Python's readlines does: after each \n, the
// last line without one when the file does not end in one.
func lines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

// search is Python's re.search on one line as readlines gives it, and
// the text the match's indexes refer to. Python's $ matches before the
// line's final \n, so the pattern is matched on the line without it
// first; a pattern that only matches with the newline (`\n`, `\s$` on an
// otherwise blank end) is matched on the whole line.
func search(re *regexp.Regexp, line []byte) ([]int, []byte) {
	text := bytes.TrimSuffix(line, []byte("\n"))
	if m := re.FindSubmatchIndex(text); m != nil {
		return m, text
	}
	if len(text) != len(line) {
		if m := re.FindSubmatchIndex(line); m != nil {
			return m, line
		}
	}
	return nil, nil
}

func trimEOL(b []byte) []byte { return bytes.TrimRight(b, "\r\n") }

// set is Python's truth of an optional string argument.
func set(p *string) bool { return p != nil && *p != "" }

func is(p *string, v string) bool { return p != nil && *p == v }

// present is ansible.builtin.lineinfile's present(), step for step.
func (a *Args) present(live edit.Live) (edit.Outcome, error) {
	if !live.Exists && !a.Create {
		return edit.Outcome{}, fmt.Errorf("Destination %s does not exist !", a.Path)
	}
	ls := lines(live.Content)
	line := []byte(*a.Line)
	after, before := a.InsertAfter, a.InsertBefore
	// index[0]: the line regexp, search_string or the exact line is on;
	// index[1]: where insertafter/insertbefore puts it.
	index := [2]int{-1, -1}
	var match []int
	var matchSrc []byte
	matched := false
	if a.re != nil {
		for n, cur := range ls {
			if m, src := search(a.re, cur); m != nil {
				index[0], match, matchSrc, matched = n, m, src, true
				if a.FirstMatch {
					break
				}
			}
		}
	}
	if a.SearchString != nil {
		for n, cur := range ls {
			if bytes.Contains(cur, []byte(*a.SearchString)) {
				index[0], matched = n, true
				if a.FirstMatch {
					break
				}
			}
		}
	}
	if !matched {
		for n, cur := range ls {
			if bytes.Equal(line, trimEOL(cur)) {
				index[0] = n
			} else if a.ins != nil {
				if m, _ := search(a.ins, cur); m == nil {
					continue
				}
				if set(after) {
					index[1] = n + 1
					if a.FirstMatch {
						break
					}
				}
				if set(before) {
					index[1] = n
					if a.FirstMatch {
						break
					}
				}
			}
		}
	}
	withNL := func(b []byte) []byte { return append(append([]byte{}, b...), '\n') }
	insert := func(at int, l []byte) {
		ls = append(ls[:at], append([][]byte{l}, ls[at:]...)...)
	}
	endsNL := func(b []byte) bool { return len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') }
	msg := ""
	switch {
	case index[0] != -1:
		newLine := line
		if a.Backrefs && matched {
			var err error
			if newLine, err = edit.Expand(a.re, string(line), matchSrc, match); err != nil {
				return edit.Outcome{}, err
			}
		}
		if !bytes.HasSuffix(newLine, []byte("\n")) {
			newLine = withNL(newLine)
		}
		if !bytes.Equal(ls[index[0]], newLine) {
			ls[index[0]] = newLine
			msg = "line replaced"
		}
	case a.Backrefs:
		// Nothing, as in Ansible: without a match the backrefs cannot
		// be filled.
	case is(before, "BOF") || is(after, "BOF"):
		insert(0, withNL(line))
		msg = "line added"
	case is(after, "EOF") || index[1] == -1:
		if len(ls) > 0 && !endsNL(ls[len(ls)-1]) {
			ls = append(ls, []byte("\n"))
		}
		ls = append(ls, withNL(line))
		msg = "line added"
	case set(after):
		// Not again when the line after the anchor is already it.
		if len(ls) == index[1] {
			if !bytes.Equal(trimEOL(ls[index[1]-1]), line) {
				ls = append(ls, withNL(line))
				msg = "line added"
			}
		} else if !bytes.Equal(line, trimEOL(ls[index[1]])) {
			insert(index[1], withNL(line))
			msg = "line added"
		}
	default:
		insert(index[1], withNL(line))
		msg = "line added"
	}
	if msg == "" {
		// Unchanged; a file that was not there stays not there.
		if !live.Exists {
			return edit.Outcome{}, nil
		}
		return edit.Outcome{After: live.Content}, nil
	}
	out := bytes.Join(ls, nil)
	if out == nil {
		out = []byte{}
	}
	return edit.Outcome{After: out, Msg: msg}, nil
}

func (a *Args) absent(live edit.Live) (edit.Outcome, error) {
	if !live.Exists {
		return edit.Outcome{Msg: "file not present", Vars: map[string]any{"found": 0}}, nil
	}
	var kept [][]byte
	found := 0
	for _, cur := range lines(live.Content) {
		var hit bool
		switch {
		case a.re != nil:
			m, _ := search(a.re, cur)
			hit = m != nil
		case a.SearchString != nil:
			hit = bytes.Contains(cur, []byte(*a.SearchString))
		default:
			hit = bytes.Equal([]byte(*a.Line), trimEOL(cur))
		}
		if hit {
			found++
			continue
		}
		kept = append(kept, cur)
	}
	out := edit.Outcome{After: live.Content, Vars: map[string]any{"found": found}}
	if found > 0 {
		out.After = bytes.Join(kept, nil)
		if out.After == nil {
			out.After = []byte{}
		}
		out.Msg = fmt.Sprintf("%d line(s) removed", found)
	}
	return out, nil
}
