// Package replace is Ansible's `replace`: every match of a pattern in a
// file (or in the part between after and before) is replaced, the rest of
// the file is left as it was. It follows ansible.builtin.replace (regexp
// in MULTILINE mode, replace with \1 and \g<name>, after/before in DOTALL
// mode), then validates the candidate on the node, writes it atomically
// with a backup, and plans nothing the second time.
//
// One difference stays: an empty match right after a non-empty one is
// skipped (Go's rule), where Python 3.7+ replaces it too; it only shows
// for patterns that can match nothing (`x*`).
package replace

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
	module.Register(module.Registration{Name: "replace", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// Args are ansible.builtin.replace's arguments.
type Args struct {
	edit.Target `yaml:",inline"`
	Regexp      string  `yaml:"regexp"`
	Replace     string  `yaml:"replace"`
	After       *string `yaml:"after"`
	Before      *string `yaml:"before"`
	Encoding    string  `yaml:"encoding"`

	re, section *regexp.Regexp
	pattern     string
}

// Validate checks the arguments and compiles the patterns.
func (a *Args) Validate() error {
	if err := a.Target.Resolve(); err != nil {
		return err
	}
	if a.Regexp == "" {
		return errors.New("regexp is required")
	}
	switch strings.ToLower(strings.ReplaceAll(a.Encoding, "_", "-")) {
	case "", "utf-8", "utf8":
	default:
		return fmt.Errorf("encoding %q: only utf-8 is supported", a.Encoding)
	}
	var err error
	if a.re, err = edit.Regexp("regexp", "(?m)"+a.Regexp); err != nil {
		return err
	}
	switch {
	case set(a.After) && set(a.Before):
		a.pattern = *a.After + "(?P<subsection>.*?)" + *a.Before
	case set(a.After):
		a.pattern = *a.After + "(?P<subsection>.*)"
	case set(a.Before):
		a.pattern = "(?P<subsection>.*)" + *a.Before
	}
	if a.pattern != "" {
		if a.section, err = edit.Regexp("after/before", "(?s)"+a.pattern); err != nil {
			return err
		}
	}
	// A bad replacement template fails at load, not on the node.
	if _, err := edit.Expand(a.re, a.Replace, nil, nil); err != nil {
		return err
	}
	return nil
}

func set(p *string) bool { return p != nil && *p != "" }

// Module implements module.Module for replace.
type Module struct{}

// NewArgs returns Ansible's defaults.
func (Module) NewArgs() module.Args { return &Args{Encoding: "utf-8"} }

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

func (a *Args) edit(live edit.Live) (edit.Outcome, error) {
	if !live.Exists {
		return edit.Outcome{}, fmt.Errorf("Path %s does not exist !", a.Path)
	}
	vars := map[string]any{"rc": 0}
	contents := live.Content
	section, lo, hi := contents, 0, len(contents)
	if a.section != nil {
		m := a.section.FindSubmatchIndex(contents)
		if m == nil {
			return edit.Outcome{After: contents, Msg: "Pattern for before/after params did not match the given file: " + a.pattern, Vars: vars}, nil
		}
		g := a.section.SubexpIndex("subsection")
		lo, hi = m[2*g], m[2*g+1]
		section = contents[lo:hi]
	}
	var out []byte
	last, n := 0, 0
	for _, m := range a.re.FindAllSubmatchIndex(section, -1) {
		rep, err := edit.Expand(a.re, a.Replace, section, m)
		if err != nil {
			return edit.Outcome{}, err
		}
		out = append(append(out, section[last:m[0]]...), rep...)
		last = m[1]
		n++
	}
	out = append(out, section[last:]...)
	if n == 0 || bytes.Equal(out, section) {
		return edit.Outcome{After: contents, Vars: vars}, nil
	}
	result := append(append(append([]byte{}, contents[:lo]...), out...), contents[hi:]...)
	return edit.Outcome{After: result, Msg: fmt.Sprintf("%d replacements made", n), Vars: vars}, nil
}
