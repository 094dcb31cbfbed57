// Package template is Ansible's `template` module: it renders a Jinja2
// file from the controller (src, relative to the playbook's directory)
// with the host's variables and makes dest hold exactly the result, like
// copy: same mode and ownership handling, and a `validate` command run on
// the candidate in a scratch directory on the node (in check mode too)
// before the live file is replaced.
//
// The template is rendered when the task's arguments are (before any node
// is contacted), so an undefined variable or an unknown filter fails the
// run at preflight, naming the template file. Values substituted are data:
// a rendered value is never parsed again.
package template

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"nodeconverge/engine/inputs"
	"nodeconverge/engine/jinja"
	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/copy"
)

func init() {
	module.Register(module.Registration{Name: "template", Module: Module{}, Inputs: module.InputBaseDir | module.InputSearchPath | module.InputVars})
}

// Args are Ansible's names.
type Args struct {
	Src         string `yaml:"src"`
	Dest        string `yaml:"dest"`
	Mode        string `yaml:"mode"`
	Owner       string `yaml:"owner"`
	Group       string `yaml:"group"`
	Backup      bool   `yaml:"backup"`
	ValidateCmd string `yaml:"validate"`
	// TrimBlocks is Ansible's trim_blocks (default true).
	TrimBlocks *bool `yaml:"trim_blocks"`

	// Content is the rendered template, set by Validate; a saved plan
	// keeps it (and applies what was reviewed).
	Content *string `yaml:"-" json:",omitempty"`

	baseDir    string
	searchDirs []string
	vars       map[string]any
}

// SetSearchPath gives the directories a relative src is looked for in
// (a role's, the task file's, the playbook's): templates/ of each first.
func (a *Args) SetSearchPath(dirs []string) { a.searchDirs = dirs }

// SetBaseDir tells the module where a relative src starts: the
// playbook's directory, as in Ansible.
func (a *Args) SetBaseDir(dir string) { a.baseDir = dir }

// SetVars gives the module the host's variables to render src with,
// and Ansible's ansible_managed (its default text) where no variable
// sets it: a template written for Ansible says what it says there.
func (a *Args) SetVars(vars map[string]any) {
	if vars != nil {
		if _, ok := vars["ansible_managed"]; !ok {
			v := make(map[string]any, len(vars)+1)
			for k, x := range vars {
				v[k] = x
			}
			v["ansible_managed"] = AnsibleManaged
			vars = v
		}
	}
	a.vars = vars
}

// AnsibleManaged is ansible-core's default ansible_managed string.
const AnsibleManaged = "Ansible managed"

func (a *Args) copyArgs() *copy.Args {
	return &copy.Args{Dest: a.Dest, Content: a.Content, Mode: a.Mode, Owner: a.Owner, Group: a.Group, Backup: a.Backup, ValidateCmd: a.ValidateCmd}
}

// Validate checks the arguments and renders src with the host's
// variables.
func (a *Args) Validate() error {
	if a.Src == "" {
		return errors.New("src is required")
	}
	if a.Content == nil {
		if a.vars == nil {
			// At load, before any host's variables: the file must
			// exist and parse.
			if _, err := a.parse(); err != nil {
				return err
			}
			// copy's checks of the other arguments, with a stand-in
			// for the content only a host's variables can render.
			c := a.copyArgs()
			c.Content = new(string)
			return c.Validate()
		}
		tpl, err := a.parse()
		if err != nil {
			return err
		}
		out, err := tpl.Render(a.vars)
		if err != nil {
			return fmt.Errorf("render %s: %w", a.path(), err)
		}
		a.Content = &out
	}
	return a.copyArgs().Validate()
}

func (a *Args) path() string {
	// Ansible looks in templates/ of each search directory first.
	return copy.Find(a.Src, "templates", a.baseDir, a.searchDirs)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (a *Args) parse() (*jinja.Template, error) {
	p := a.path()
	b, err := inputs.ReadFile(p, "template src", inputs.MaxCopySrc)
	if err != nil {
		return nil, fmt.Errorf("read src %s: %w", p, err)
	}
	trim := a.TrimBlocks == nil || *a.TrimBlocks
	tpl, err := jinja.ParseWith(string(b), jinja.Options{TrimBlocks: trim, Dir: filepath.Dir(p)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return tpl, nil
}

// Module implements module.Module for template.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

// Check is copy's, with the rendered content.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	if a.Content == nil {
		return nil, errors.New("the template was not rendered (no variables)")
	}
	return copy.Module{}.Check(ctx, h, a.copyArgs())
}

// Apply is copy's.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	return copy.Module{}.Apply(ctx, h, p)
}
