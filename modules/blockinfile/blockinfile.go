// Package blockinfile is Ansible's `blockinfile`: a block of lines between
// two marker lines is the task's, the rest of the file is left as it was.
// It follows ansible.builtin.blockinfile step for step (marker with
// {mark}, marker_begin/marker_end, insertafter/insertbefore with BOF/EOF
// and (?m) patterns, state absent, create), then validates the candidate
// on the node, writes it atomically with a backup, and plans nothing the
// second time.
package blockinfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/edit"
)

func init() {
	module.Register(module.Registration{Name: "blockinfile", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// Args are ansible.builtin.blockinfile's arguments.
type Args struct {
	edit.Target  `yaml:",inline"`
	State        string  `yaml:"state"`
	Marker       string  `yaml:"marker"`
	Block        *string `yaml:"block"`
	Content      *string `yaml:"content"`
	InsertAfter  *string `yaml:"insertafter"`
	InsertBefore *string `yaml:"insertbefore"`
	Create       bool    `yaml:"create"`
	MarkerBegin  string  `yaml:"marker_begin"`
	MarkerEnd    string  `yaml:"marker_end"`

	ins       *regexp.Regexp
	multiline bool
}

// Validate checks the arguments as Ansible's argument spec does.
func (a *Args) Validate() error {
	if err := a.Target.Resolve(); err != nil {
		return err
	}
	if a.Content != nil {
		if a.Block != nil {
			return errors.New("give block once (content is its alias)")
		}
		a.Block, a.Content = a.Content, nil
	}
	switch {
	case a.State == "":
		a.State = "present"
	case a.State != "present" && a.State != "absent":
		return fmt.Errorf("state %q: one of present, absent", a.State)
	}
	if a.InsertAfter != nil && a.InsertBefore != nil {
		return errors.New("parameters are mutually exclusive: insertbefore|insertafter")
	}
	var err error
	var pat string
	switch {
	case a.InsertAfter != nil && *a.InsertAfter != "EOF":
		pat = *a.InsertAfter
		a.ins, err = edit.Regexp("insertafter", pat)
	case a.InsertBefore != nil && *a.InsertBefore != "BOF":
		pat = *a.InsertBefore
		a.ins, err = edit.Regexp("insertbefore", pat)
	}
	a.multiline = a.ins != nil && edit.Multiline(pat)
	return err
}

// Module implements module.Module for blockinfile.
type Module struct{}

// NewArgs returns Ansible's defaults.
func (Module) NewArgs() module.Args {
	return &Args{Marker: "# {mark} ANSIBLE MANAGED BLOCK", MarkerBegin: "BEGIN", MarkerEnd: "END"}
}

// Prefetch reads the file with the play's other reads.
func (Module) Prefetch(margs module.Args) transport.Query {
	return transport.Query{Files: []string{margs.(*Args).Path}}
}

// Check plans the edit.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	return edit.Plan(ctx, h, &a.Target, "backup_file", a.edit)
}

// Apply writes the planned file.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	return module.ApplyFiles(ctx, h, p)
}

// splitLines is Python's bytes.splitlines(keepends=True): lines end at
// \n, \r\n or \r, each keeping its ending.
func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			out = append(out, b)
			break
		}
		end := i + 1
		if b[i] == '\r' && end < len(b) && b[end] == '\n' {
			end++
		}
		out = append(out, b[:end])
		b = b[end:]
	}
	return out
}

// edit is ansible.builtin.blockinfile's main(), step for step.
func (a *Args) edit(live edit.Live) (edit.Outcome, error) {
	// Ansible's order: a missing file fails without create, even for
	// state: absent.
	if !live.Exists && !a.Create {
		return edit.Outcome{}, fmt.Errorf("Path %s does not exist !", a.Path)
	}
	if !live.Exists && a.State == "absent" {
		return edit.Outcome{Msg: fmt.Sprintf("File %s not present", a.Path)}, nil
	}
	lines := splitLines(live.Content)
	block := []byte{}
	if a.Block != nil {
		block = []byte(*a.Block)
	}
	marker0 := []byte(strings.ReplaceAll(a.Marker, "{mark}", a.MarkerBegin) + "\n")
	marker1 := []byte(strings.ReplaceAll(a.Marker, "{mark}", a.MarkerEnd) + "\n")
	var blockLines [][]byte
	if a.State == "present" && len(block) > 0 {
		if !bytes.HasSuffix(block, []byte("\n")) {
			block = append(block, '\n')
		}
		blockLines = append(append([][]byte{marker0}, splitLines(block)...), marker1)
	}
	n0, n1 := -1, -1
	for i, l := range lines {
		if bytes.Equal(l, marker0) {
			n0 = i
		}
		if bytes.Equal(l, marker1) {
			n1 = i
		}
	}
	insertAfter := a.InsertAfter
	if a.InsertAfter == nil && a.InsertBefore == nil {
		eof := "EOF"
		insertAfter = &eof
	}
	switch {
	case n0 == -1 || n1 == -1:
		n0 = -1
		switch {
		case a.ins != nil:
			if a.multiline {
				if m := a.ins.FindIndex(live.Content); m != nil {
					if insertAfter != nil {
						n0 = bytes.Count(live.Content[:m[1]], []byte("\n"))
					} else {
						n0 = bytes.Count(live.Content[:m[0]], []byte("\n"))
					}
				}
			} else {
				for i, l := range lines {
					if a.ins.Match(bytes.TrimSuffix(l, []byte("\n"))) || a.ins.Match(l) {
						n0 = i
					}
				}
			}
			if n0 == -1 {
				n0 = len(lines)
			} else if insertAfter != nil {
				n0++
			}
		case a.InsertBefore != nil:
			n0 = 0 // insertbefore: BOF
		default:
			n0 = len(lines) // insertafter: EOF
		}
	case n0 < n1:
		lines = append(lines[:n0], lines[n1+1:]...)
	default:
		lines = append(lines[:n1], lines[n0+1:]...)
		n0 = n1
	}
	if n0 > len(lines) {
		n0 = len(lines)
	}
	if n0 > 0 && !bytes.HasSuffix(lines[n0-1], []byte("\n")) {
		lines[n0-1] = append(append([]byte{}, lines[n0-1]...), '\n')
	}
	rest := append([][]byte{}, lines[n0:]...)
	lines = append(append(lines[:n0], blockLines...), rest...)
	result := bytes.Join(lines, nil)
	if result == nil {
		result = []byte{}
	}
	out := edit.Outcome{After: result}
	switch {
	case live.Exists && bytes.Equal(live.Content, result):
	case !live.Exists:
		out.Msg = "File created"
	case len(blockLines) == 0:
		out.Msg = "Block removed"
	default:
		out.Msg = "Block inserted"
	}
	return out, nil
}
