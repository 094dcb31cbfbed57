// Package playbook loads Ansible-style playbooks into typed, validated plays.
//
// Everything that can be checked before touching a node is checked at Load:
// play and task keys, module names against the module registry, every
// argument key against the module's Args struct, the types of arguments that
// hold no template, Jinja2 syntax and filters (engine/jinja), conditions
// (when, changed_when, failed_when), and that every notify names a handler.
// Arguments with templates are checked again per host by Task.Render.
//
// Load goes on past a problem and returns every problem of the playbook at
// once (*Errors), each naming file:line:col and, for what Ansible has and
// nodeconverge does not run (lineinfile, apt, block, roles...), the
// nodeconverge way to say it (hints.go). No input makes the loader panic.
package playbook

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/facts"
	"nodeconverge/engine/inputs"
	"nodeconverge/engine/jinja"
	"nodeconverge/engine/module"
	"nodeconverge/engine/yamlx"
)

// Serial is a play's batch size: a count or a percentage of the play's
// hosts. At most one is set; the zero value means all hosts in one batch.
type Serial struct {
	Count   int
	Percent float64
}

// Task is one task or handler: one module with its arguments.
type Task struct {
	Name   string
	Module string // the registered module name, FQCN prefix stripped
	// Args is the module's argument mapping as written, nil when the task
	// gives none. Render substitutes variables and decodes it.
	Args   *yaml.Node
	Notify []string
	// Listen are a handler's listen: topics; a notify of one runs it.
	Listen  []string
	Tags    []string
	Pos     Pos
	Handler bool
	// Timeout bounds the task on each host (Ansible's `timeout:`, in
	// seconds); zero means the run's default.
	Timeout time.Duration
	// NoLog hides the task's arguments, diff, output and messages in
	// every view (Ansible's `no_log:`); set on the task or inherited from
	// its play.
	NoLog bool
	// When are the task's conditions (Ansible's `when:`, a list is and);
	// the task runs on a host only when every one is true there.
	When []*Cond
	// ChangedWhen and FailedWhen, when set, decide the task's changed and
	// failed status from its result (and its registered variable).
	ChangedWhen []*Cond
	FailedWhen  []*Cond
	// Until, when set, runs the task again until it holds (Ansible's
	// until:, with the task's register being its latest result), at most
	// Attempts times, Delay apart; command and shell only.
	Until    []*Cond
	Attempts int
	Delay    time.Duration
	// untilAt is where until: was written (checked once the module is
	// known).
	untilAt  *yaml.Node
	delaySet bool
	// Register names the variable the task's result is kept under for the
	// later tasks of the host (rc, stdout, stderr, changed, failed...).
	Register string
	// IgnoreErrors keeps a host in the play when the task fails there;
	// the failure is counted as ignored.
	IgnoreErrors bool
	// IgnoreErrorsWhen is a templated ignore_errors ("{{ x | default(true)
	// }}"), decided per host with its variables when the task fails there;
	// nil when ignore_errors is a plain boolean (IgnoreErrors).
	IgnoreErrorsWhen []*Cond
	// Become is the task's `become:`, nil when it does not say; the play
	// folds it into its own (one connection per host).
	Become *bool
	// Vars are the task's own vars, above the play's.
	Vars map[string]any
	// Sets are the variables the task sets on its host besides its
	// register (set_fact's names), known at load.
	Sets []string
	// Loop is the task's loop: (or with_items:), nil without one: a
	// list, or a template that gives one; the task runs its module once
	// per item, with the item as `item`.
	Loop *yaml.Node
	// argNames are the variables the arguments' and loop's templates
	// read; templates are those templates, parsed at load, by source.
	// Both are filled by the loader and only read afterwards, so hosts
	// render the task concurrently.
	argNames  []string
	templates map[string]*jinja.Template
	// flatten says with_items: nested lists are flattened one level;
	// firstFound says the loop is with_first_found's (its one item the
	// first file found).
	flatten, firstFound bool
	// loopVar and indexVar are loop_control's loop_var and index_var.
	loopVar, indexVar string
	// Environment is the task's environment: (its play's, its block's or
	// role's and its own, merged), a mapping of names to values that may
	// hold templates, or one template that gives the mapping; nil: none.
	// command and shell run with it (module.Environment).
	Environment []*yaml.Node
	// Role is the role the task belongs to (its variables, its files),
	// nil for a play's own task.
	Role *Role
	// searchDirs are where a relative src is looked for, in order: the
	// role's directory, the task file's, the playbook's (Ansible's
	// search path; copy looks in files/ of each, template in templates/).
	searchDirs []string
	// Facts are the facts (engine/facts names, no ansible_ prefix) the
	// task reads, through the variables it reads too: the runner decides
	// such a task once its host's facts are read.
	Facts []string
	// IncludedBy is the outermost dynamic include (include_tasks,
	// include_role) the task came in through; nil when it was read
	// statically. nodeconverge expands such an include at load, but
	// Ansible reads its tasks only when it runs, so --list-tasks shows the
	// include itself, as ansible-playbook does.
	IncludedBy *Include
	// Block is the innermost block with a rescue: or always: section the
	// task is in, nil when there is none; Section says which of its
	// sections (a block with neither is only its keywords, given to its
	// tasks at load).
	Block   *Block
	Section Section
	// CheckMode is the task's check_mode: (or its block's, include's,
	// role's or play's), nil when none says: true runs it as check mode
	// does in an apply too (planned and reported, never applied); false
	// changes nothing in nodeconverge, whose check mode never runs a
	// command (the modules that only read run in check mode anyway).
	CheckMode *bool
	// standsForInclude says the task is the guard that stands for a
	// templated include_tasks itself (counted as Ansible counts the
	// include): the include's when: decides it, never quietly.
	standsForInclude bool
	// Meta is a meta: task's action (flush_handlers, noop), "" for a
	// module's task; its Module is the key as written (meta or
	// ansible.builtin.meta) and it has no arguments: the runner does it
	// itself.
	Meta string
}

// Section is a part of a block: its tasks, its rescue: or its always:.
type Section int

// The sections of a block, in the order they run.
const (
	InBlock Section = iota
	InRescue
	InAlways
)

// Block is a block with a rescue: or always: section, as Ansible runs
// it: its rescue runs on a host where one of its tasks failed, and its
// always runs on every host that reached it. Its tasks are in the play's
// task list (Task.Block); the runner tracks each host's state in it.
type Block struct {
	Pos Pos
	// Parent is the block this one is in (Within its sections), nil at
	// the top of the play.
	Parent *Block
	Within Section
}

// Chain calls f for each block t is in, innermost first, with the
// section of it t is in, until f returns false.
func (t *Task) Chain(f func(b *Block, sec Section) bool) {
	b, sec := t.Block, t.Section
	for b != nil {
		if !f(b, sec) {
			return
		}
		b, sec = b.Parent, b.Within
	}
}

// OnFailure says t is in a rescue: or always: section (of any block it is
// in): ansible-playbook --list-tasks lists only blocks' own tasks.
func (t *Task) OnFailure() bool {
	out := false
	t.Chain(func(_ *Block, sec Section) bool {
		out = sec != InBlock
		return !out
	})
	return out
}

// Include is a dynamic include as --list-tasks shows it.
type Include struct {
	// Name is the include task's name ("role : name" inside a role), or
	// its action when it has none, as Ansible's Task.get_name gives it.
	Name string
	// Tags are the include's own tags (not those its apply: gives).
	Tags []string
}

// Cond is one parsed condition of when:, changed_when: or failed_when:.
type Cond struct {
	Expr *jinja.Expr
	Src  string
	Pos  Pos
	// Quiet says the condition picks which of the files a templated
	// include names a host reads: where it is false the task is not the
	// host's at all (Ansible never reads it there), so it is skipped
	// without a result, a count or a registered value.
	Quiet bool
}

// Names are the variables the task's conditions and arguments read.
func (t *Task) Names() []string {
	var out []string
	for _, cs := range [][]*Cond{t.When, t.ChangedWhen, t.FailedWhen, t.Until, t.IgnoreErrorsWhen} {
		for _, c := range cs {
			out = append(out, c.Expr.Names()...)
		}
	}
	out = append(out, t.argNames...)
	return out
}

// Play is one play of a playbook.
type Play struct {
	Name              string
	Hosts             string // an inventory pattern
	Vars              map[string]any
	Become            *bool // nil: as the inventory says
	Serial            Serial
	MaxFailPercentage *float64 // nil: no limit other than all hosts failing
	Tasks             []*Task
	Handlers          []*Task
	Pos               Pos
	File              string
	// NoLog is the play's `no_log:`, the default of its tasks and handlers.
	NoLog bool
	// GatherFacts is the play's gather_facts: true unless it says false,
	// as in Ansible. Facts are read only when a task reads one (Task.Facts),
	// in the host's first round trip (engine/facts).
	GatherFacts bool
	// Subset is the play's gather_subset: which of the set's subsets are
	// gathered.
	Subset facts.Subset
	// environment is the play's environment:, given to every task.
	environment *yaml.Node
	// checkMode is the play's check_mode:, given to every task that
	// does not say (Task.CheckMode).
	checkMode *bool
}

// AllTasks is the play's tasks followed by its handlers.
func (p *Play) AllTasks() []*Task {
	return append(append(make([]*Task, 0, len(p.Tasks)+len(p.Handlers)), p.Tasks...), p.Handlers...)
}

var playKeys = []string{"become", "check_mode", "environment", "gather_facts", "gather_subset", "gather_timeout", "handlers", "hosts", "max_fail_percentage", "name", "no_log", "post_tasks", "pre_tasks", "roles", "serial", "tasks", "vars"}

var taskKeys = []string{"become", "become_user", "changed_when", "check_mode", "delay", "failed_when", "ignore_errors", "name", "no_log", "notify", "register", "retries", "tags", "timeout", "until", "vars", "when"}

// fqcnPrefix is accepted in front of module names so playbooks written for
// Ansible ("ansible.builtin.copy") load unchanged.
const fqcnPrefix = "ansible.builtin."

type loader struct {
	file string
	// notifyAt remembers where each notify entry was written so an
	// unknown handler is reported there.
	notifyAt map[*Task][]*yaml.Node
	// noLogSet marks the tasks that set no_log themselves; the others
	// take their play's.
	noLogSet map[*Task]bool
	// errs are every problem found so far: the loader goes on after a
	// problem so one run lists them all.
	errs []*Error
	// playDir is the playbook's directory (roles/ and task files beside
	// it), rolesPath where else roles are looked for (roles.go).
	playDir   string
	rolesPath []string
	// curRole is the role whose files are being read; depth counts the
	// files and roles being read inside each other.
	curRole *Role
	depth   int
	// rolesSeen and handlersSeen are, per play, the role uses and
	// handler files already read; extraHandlers the handlers of roles
	// that tasks import.
	rolesSeen     map[string]bool
	handlersSeen  map[string]bool
	extraHandlers []*Task
	// blk and sec are the block with rescue:/always: being read and the
	// section of it (Task.Block).
	blk *Block
	sec Section
}

// add records a problem and goes on.
func (l *loader) add(err error) {
	if err == nil {
		return
	}
	var e *Error
	if errors.As(err, &e) {
		l.errs = append(l.errs, e)
		return
	}
	l.errs = append(l.errs, &Error{Pos: Pos{File: l.file, Line: 1, Col: 1}, Msg: err.Error()})
}

// Load reads and validates a playbook.
func Load(path string) ([]*Play, error) {
	data, err := inputs.ReadFile(path, "playbook", inputs.MaxPlaybook)
	if err != nil {
		return nil, fmt.Errorf("read playbook %s: %w", path, err)
	}
	return load(path, data)
}

// load parses playbook text that was read from path. It goes on past a
// problem and returns every problem it found (an *Errors), each at its
// file:line:col, so a playbook written for Ansible is fixed in one pass.
func load(path string, data []byte) ([]*Play, error) {
	doc, err := parseYAML(path, data)
	if err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, &Error{Pos: Pos{File: path, Line: 1, Col: 1}, Msg: "playbook is empty: expected a list of plays"}
	}
	root := yamlx.Deref(doc.Content[0])
	if root == nil || root.Kind != yaml.SequenceNode {
		return nil, nodeErr(path, doc.Content[0], "a playbook must be a list of plays (each starting with `- hosts: …`), got %s", yamlx.KindName(root))
	}
	l := &loader{file: path, notifyAt: map[*Task][]*yaml.Node{}, noLogSet: map[*Task]bool{}, playDir: filepath.Dir(path), rolesPath: rolesPath()}
	var plays []*Play
	for _, item := range root.Content {
		if p := l.play(item); p != nil {
			plays = append(plays, p)
		}
	}
	if len(root.Content) == 0 {
		l.add(nodeErr(path, root, "playbook has no plays"))
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	return plays, nil
}

// err is every problem found, nil when there is none; a single problem is
// returned as its *Error.
func (l *loader) err() error {
	switch len(l.errs) {
	case 0:
		return nil
	case 1:
		return l.errs[0]
	}
	sort.SliceStable(l.errs, func(i, j int) bool {
		a, b := l.errs[i].Pos, l.errs[j].Pos
		return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
	})
	return &Errors{List: l.errs}
}

func (l *loader) play(n *yaml.Node) *Play {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.MappingNode {
		l.add(nodeErr(l.file, n, "a play must be a mapping with hosts and tasks, got %s", yamlx.KindName(v)))
		return nil
	}
	p := &Play{Pos: posOf(l.file, v), File: l.file, Vars: map[string]any{}, GatherFacts: true}
	var subset []string
	seen := map[string]bool{}
	var hostsSeen bool
	var tasksNode, handlersNode, rolesNode, preNode, postNode *yaml.Node
	l.rolesSeen, l.handlersSeen, l.extraHandlers = map[string]bool{}, map[string]bool{}, nil
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		key, err := l.key(k, seen)
		if err != nil {
			l.add(err)
			continue
		}
		switch key {
		case "name":
			p.Name, err = l.str(val, "play name")
		case "hosts":
			p.Hosts, err = l.hosts(val)
			hostsSeen = true
		case "vars":
			if p.Vars, err = l.vars(val); p.Vars == nil {
				p.Vars = map[string]any{}
			}
		case "become":
			var b bool
			if b, err = l.boolean(val, "become"); err == nil {
				p.Become = &b
			}
		case "no_log":
			p.NoLog, err = l.noLog(val)
		case "check_mode":
			var b bool
			if b, err = l.boolean(val, "check_mode"); err == nil {
				p.checkMode = &b
			}
		case "gather_facts":
			p.GatherFacts, err = l.boolean(val, "gather_facts")
		case "environment":
			err = l.checkEnvironment(nil, val)
			p.environment = val
		case "gather_subset":
			subset, _, err = l.stringList(val, "gather_subset", true)
		case "gather_timeout":
			// The facts come in the host's first round trip, under
			// that step's deadline.
			_, err = l.timeout(val)
		case "serial":
			p.Serial, err = l.serial(val)
		case "max_fail_percentage":
			var f float64
			if f, err = l.percentage(val); err == nil {
				p.MaxFailPercentage = &f
			}
		case "tasks":
			tasksNode = val
		case "roles":
			rolesNode = val
		case "pre_tasks":
			preNode = val
		case "post_tasks":
			postNode = val
		case "handlers":
			handlersNode = val
		default:
			if hint, ok := playKeywordHints[key]; ok {
				err = nodeErr(l.file, k, "play keyword %q is %s", key, hint)
			} else {
				err = nodeErr(l.file, k, "unknown play key %q%s", key, yamlx.DidYouMean(key, playKeys))
				// A misspelt hosts is the one problem, not two.
				hostsSeen = hostsSeen || yamlx.Suggest(key, playKeys) == "hosts"
			}
		}
		l.add(err)
	}
	if !hostsSeen {
		l.add(nodeErr(l.file, v, "play %q has no hosts: add `hosts: <pattern>`", p.Name))
	}
	var serr error
	if p.Subset, serr = facts.ParseSubset(subset); serr != nil {
		l.add(nodeErr(l.file, v, "%v", serr))
	}
	// Ansible's order: pre_tasks, roles, tasks, post_tasks; the roles'
	// handlers before the play's own (a play's handler of the same name
	// wins, as the last one defined does in Ansible).
	pre := l.tasks(preNode, false)
	roleTasks, roleHandlers := l.rolesOf(rolesNode)
	own := l.tasks(tasksNode, false)
	post := l.tasks(postNode, false)
	playHandlers := l.tasks(handlersNode, true)
	p.Tasks = append(append(append(pre, roleTasks...), own...), post...)
	p.Handlers = append(append(roleHandlers, l.extraHandlers...), playHandlers...)
	if p.environment != nil {
		for _, t := range p.AllTasks() {
			t.Environment = append([]*yaml.Node{p.environment}, t.Environment...)
			l.envNames(t, p.environment)
		}
	}
	l.checkFacts(p)
	for _, t := range p.AllTasks() {
		if !l.noLogSet[t] {
			t.NoLog = p.NoLog
		}
		if t.CheckMode == nil && p.checkMode != nil {
			b := *p.checkMode
			t.CheckMode = &b
		}
	}
	l.foldBecome(p)
	handlers := map[string]bool{}
	var handlerNames []string
	// topics are the names a notify may use for handlers besides their
	// own: "role : name", and each handler's listen: topics.
	topics := map[string][]string{}
	for _, h := range p.Handlers {
		if !handlers[h.Name] {
			handlerNames = append(handlerNames, h.Name)
		}
		handlers[h.Name] = true
		if h.Role != nil {
			topics[h.Role.Name+" : "+h.Name] = append(topics[h.Role.Name+" : "+h.Name], h.Name)
		}
		for _, tp := range h.Listen {
			topics[tp] = append(topics[tp], h.Name)
		}
	}
	for _, t := range append(append([]*Task{}, p.Tasks...), p.Handlers...) {
		var notify []string
		for i, name := range t.Notify {
			if handlers[name] || len(topics[name]) > 0 {
				if handlers[name] {
					notify = append(notify, name)
				}
				notify = append(notify, topics[name]...)
				continue
			}
			hint := fmt.Sprintf(" (this play defines: %s)", strings.Join(quoteAll(handlerNames), ", "))
			if len(handlerNames) == 0 {
				hint = " (this play has no handlers)"
			}
			if s := yamlx.Suggest(name, handlerNames); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
			}
			l.add(nodeErr(t.Pos.File, l.notifyAt[t][i], "notify: no handler named %q%s", name, hint))
		}
		// The runner finds handlers by name: a notify by topic is the
		// names of the handlers that listen to it.
		t.Notify = dedupeStrings(notify)
	}
	return p
}

// foldBecome makes a task's become: the play's: a host's tasks run over
// one connection, which becomes root or not for all of them. A task that
// says become: true makes a play that does not say otherwise become; a
// play whose tasks disagree is refused at the task that disagrees.
func (l *loader) foldBecome(p *Play) {
	var yes, no *Task
	for _, t := range p.AllTasks() {
		switch {
		case t.Become == nil:
		case *t.Become && yes == nil:
			yes = t
		case !*t.Become && no == nil:
			no = t
		}
	}
	switch {
	case yes != nil && (no != nil || p.Become != nil && !*p.Become):
		other := "the play says become: false"
		if no != nil {
			other = fmt.Sprintf("%s says become: false", taskLabel(no))
		}
		l.add(&Error{Pos: yes.Pos, Msg: fmt.Sprintf("%s says become: true and %s: nodeconverge runs a host's tasks over one connection, which becomes root for all of them or for none; split the play in two", taskLabel(yes), other)})
	case yes != nil:
		b := true
		p.Become = &b
	case no != nil && p.Become != nil && *p.Become:
		l.add(&Error{Pos: no.Pos, Msg: fmt.Sprintf("%s says become: false in a play that becomes root: nodeconverge runs a host's tasks over one connection; split the play in two", taskLabel(no))})
	case no != nil && p.Become == nil:
		b := false
		p.Become = &b
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func (l *loader) key(k *yaml.Node, seen map[string]bool) (string, error) {
	k = yamlx.Deref(k)
	if k == nil || k.Kind != yaml.ScalarNode {
		return "", nodeErr(l.file, k, "key must be a string, got %s", yamlx.KindName(k))
	}
	if seen[k.Value] {
		return "", nodeErr(l.file, k, "duplicate key %q", k.Value)
	}
	seen[k.Value] = true
	return k.Value, nil
}

// timeout reads a task's `timeout:`, whole seconds as in Ansible.
func (l *loader) timeout(n *yaml.Node) (time.Duration, error) {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.ScalarNode {
		return 0, nodeErr(l.file, n, "timeout must be a whole number of seconds, got %s", yamlx.KindName(v))
	}
	sec, err := strconv.Atoi(strings.TrimSpace(v.Value))
	if err != nil || sec <= 0 || sec > 7*24*3600 {
		return 0, nodeErr(l.file, n, "timeout: %q is not a whole number of seconds from 1 to 604800", v.Value)
	}
	return time.Duration(sec) * time.Second, nil
}

func (l *loader) str(n *yaml.Node, what string) (string, error) {
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return "", nil
	}
	if v.Kind != yaml.ScalarNode {
		return "", nodeErr(l.file, n, "%s must be a string, got %s", what, yamlx.KindName(v))
	}
	return v.Value, nil
}

func (l *loader) hosts(n *yaml.Node) (string, error) {
	v := yamlx.Deref(n)
	var parts []string
	switch {
	case v != nil && v.Kind == yaml.ScalarNode && !yamlx.IsNull(v):
		parts = []string{v.Value}
	case v != nil && v.Kind == yaml.SequenceNode:
		// Ansible accepts a list of patterns and joins it.
		for _, it := range v.Content {
			s := yamlx.Deref(it)
			if s == nil || s.Kind != yaml.ScalarNode || yamlx.IsNull(s) {
				return "", nodeErr(l.file, it, "hosts: each list item must be a pattern string, got %s", yamlx.KindName(s))
			}
			parts = append(parts, s.Value)
		}
	default:
		return "", nodeErr(l.file, n, "hosts must be a host pattern such as \"gpu\" or \"gpu:!omen2\", got %s", yamlx.KindName(v))
	}
	s := strings.TrimSpace(strings.Join(parts, ","))
	if s == "" {
		return "", nodeErr(l.file, n, "hosts must not be empty")
	}
	return s, nil
}

func (l *loader) vars(n *yaml.Node) (map[string]any, error) {
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return map[string]any{}, nil
	}
	if v.Kind == yaml.SequenceNode {
		// Ansible also takes a list of mappings, merged in order (a later
		// one's names win).
		out := map[string]any{}
		for _, item := range v.Content {
			if it := yamlx.Deref(item); it == nil || it.Kind != yaml.MappingNode {
				return nil, nodeErr(l.file, item, "vars as a list must be a list of mappings of names to values, got %s", yamlx.KindName(it))
			}
			m, err := l.vars(item)
			if err != nil {
				return nil, err
			}
			for k, x := range m {
				out[k] = x
			}
		}
		return out, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, nodeErr(l.file, n, "vars must be a mapping of names to values, got %s", yamlx.KindName(v))
	}
	for i := 0; i < len(v.Content); i += 2 {
		k := yamlx.Deref(v.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode || !varNameRe.MatchString(k.Value) && k.Value != "<<" {
			return nil, nodeErr(l.file, v.Content[i], "variable name must be a word of letters, digits and _, got %s", yamlx.KindName(k))
		}
	}
	x, err := decodeValue(l.file, v)
	if err != nil {
		return nil, err
	}
	m, ok := x.(map[string]any)
	if !ok {
		return nil, nodeErr(l.file, n, "vars must be a mapping of names to values")
	}
	return m, nil
}

func (l *loader) boolean(n *yaml.Node, what string) (bool, error) {
	v := yamlx.Deref(n)
	if v != nil && v.Kind == yaml.ScalarNode {
		switch strings.ToLower(v.Value) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
	}
	return false, nodeErr(l.file, n, "%s must be true or false, got %s", what, yamlx.KindName(v))
}

// noLog reads `no_log:`. A template is refused like any other non-boolean:
// whether a task's output is hidden is decided before any host's vars
// are known, so a typo can never print what was meant to be hidden.
func (l *loader) noLog(n *yaml.Node) (bool, error) {
	v := yamlx.Deref(n)
	if v != nil && v.Kind == yaml.ScalarNode {
		switch strings.ToLower(v.Value) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
		if strings.Contains(v.Value, "{{") {
			return false, nodeErr(l.file, n, "no_log must be true or false, got the template %q: templates are not supported here (whether output is hidden cannot depend on a variable)", v.Value)
		}
		return false, nodeErr(l.file, n, "no_log must be true or false, got %q", v.Value)
	}
	return false, nodeErr(l.file, n, "no_log must be true or false, got %s", yamlx.KindName(v))
}

func (l *loader) serial(n *yaml.Node) (Serial, error) {
	v := yamlx.Deref(n)
	if v != nil && v.Kind == yaml.SequenceNode {
		return Serial{}, nodeErr(l.file, n, "serial: a list of batch sizes is not supported; give one number (3) or percentage (\"30%%\")")
	}
	if v == nil || v.Kind != yaml.ScalarNode || yamlx.IsNull(v) {
		return Serial{}, nodeErr(l.file, n, "serial must be a number of hosts (3) or a percentage (\"30%%\"), got %s", yamlx.KindName(v))
	}
	s := strings.TrimSpace(v.Value)
	if strings.HasSuffix(s, "%") {
		f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
		if err != nil || f <= 0 || f > 100 || f != f {
			return Serial{}, nodeErr(l.file, n, "serial: %q is not a percentage between 0%% and 100%%", s)
		}
		return Serial{Percent: f}, nil
	}
	c, err := strconv.Atoi(s)
	if err != nil {
		return Serial{}, nodeErr(l.file, n, "serial: %q is not a number of hosts (3) or a percentage (\"30%%\")", s)
	}
	if c < 0 {
		return Serial{}, nodeErr(l.file, n, "serial: %d must not be negative", c)
	}
	return Serial{Count: c}, nil
}

func (l *loader) percentage(n *yaml.Node) (float64, error) {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.ScalarNode || yamlx.IsNull(v) {
		return 0, nodeErr(l.file, n, "max_fail_percentage must be a number from 0 to 100, got %s", yamlx.KindName(v))
	}
	s := strings.TrimSuffix(strings.TrimSpace(v.Value), "%")
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != f {
		return 0, nodeErr(l.file, n, "max_fail_percentage: %q is not a number from 0 to 100", v.Value)
	}
	if f < 0 || f > 100 {
		return 0, nodeErr(l.file, n, "max_fail_percentage: %v is not between 0 and 100", f)
	}
	return f, nil
}

// tasks reads a list of tasks or handlers; a task with problems is
// reported and left out.
func (l *loader) tasks(n *yaml.Node, handler bool) []*Task {
	what := "tasks"
	if handler {
		what = "handlers"
	}
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		l.add(nodeErr(l.file, n, "%s must be a list, got %s", what, yamlx.KindName(v)))
		return nil
	}
	var out []*Task
	for _, item := range v.Content {
		if m := yamlx.Deref(item); m != nil && m.Kind == yaml.MappingNode {
			if _, ok := module.Lookup("set_fact"); ok {
				if alts := l.includeVars(m); alts != nil {
					// A templated include_vars: one set_fact per file
					// it can name, each under its condition, listed
					// once as the include_vars it is (--list-tasks).
					var inc *Include
					for _, a := range alts {
						t := l.task(a, handler)
						if t == nil {
							continue
						}
						if inc == nil {
							inc = &Include{Name: includeVarsKey(m), Tags: t.Tags}
							if t.Name != "" {
								inc.Name = t.Name
								if l.curRole != nil {
									inc.Name = l.curRole.Name + " : " + t.Name
								}
							}
						}
						t.IncludedBy = inc
						out = append(out, t)
					}
					continue
				}
			}
			if kind, key, val := includeKind(m); kind != "" {
				out = append(out, l.included(m, handler, kind, key, val)...)
				continue
			}
		}
		if t := l.task(item, handler); t != nil {
			out = append(out, t)
		}
	}
	return out
}

// task reads one task; it returns nil when the task has a problem (every
// problem is recorded).
func (l *loader) task(n *yaml.Node, handler bool) *Task {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.MappingNode {
		l.add(nodeErr(l.file, n, "a task must be a mapping with a name and one module, got %s", yamlx.KindName(v)))
		return nil
	}
	before := len(l.errs)
	t := &Task{Pos: posOf(l.file, v), Handler: handler, searchDirs: l.searchDirs(), Block: l.blk, Section: l.sec}
	seen := map[string]bool{}
	var modKey, modVal, argsKey, argsVal *yaml.Node
	// refused says a key already stood for the module or the structure
	// (an unsupported module, block:), so "no module" would say nothing new.
	refused := false
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		key, err := l.key(k, seen)
		if err != nil {
			l.add(err)
			continue
		}
		if key == "args" {
			// Ansible's args: more of the module's arguments (a
			// free-form command's creates:, chdir:).
			argsKey, argsVal = k, val
			continue
		}
		if done, err := l.taskKeyword(t, key, k, val); done {
			l.add(err)
			continue
		}
		if strings.TrimPrefix(key, fqcnPrefix) == "meta" {
			if modKey != nil || t.Meta != "" {
				l.add(nodeErr(l.file, k, "%s has two modules: a task runs exactly one; split it into two tasks", taskLabel(t)))
				continue
			}
			// The action as written: ansible-playbook --list-tasks names an
			// unnamed meta task by it.
			t.Meta, t.Module = l.meta(val, handler), key
			refused = refused || t.Meta == ""
			continue
		}
		name := key
		if strings.HasPrefix(name, fqcnPrefix) {
			if _, ok := module.Lookup(strings.TrimPrefix(name, fqcnPrefix)); ok {
				name = strings.TrimPrefix(name, fqcnPrefix)
			}
		}
		if _, ok := module.Lookup(name); !ok {
			switch hint, kw := taskKeywordHints[key]; {
			case kw:
				l.add(nodeErr(l.file, k, "task keyword %q is %s", key, hint))
				refused = refused || key == "block" || key == "local_action"
			case moduleHint(key) != "":
				l.add(nodeErr(l.file, k, "module %q is %s", key, moduleHint(key)))
				refused = true
			default:
				l.add(l.unknownTaskKey(k, key, modKey != nil))
			}
			continue
		}
		if modKey != nil {
			l.add(nodeErr(l.file, k, "%s has two modules, %q and %q: a task runs exactly one module; split it into two tasks", taskLabel(t), t.Module, name))
			continue
		}
		modKey, modVal, t.Module = k, val, name
	}
	label := taskLabel(t)
	if t.Meta != "" {
		if modKey != nil {
			l.add(nodeErr(l.file, modKey, "%s has two modules, meta and %q: a task runs exactly one; split it into two tasks", label, t.Module))
		}
		if argsKey != nil || t.Register != "" || t.Loop != nil || len(t.Until) > 0 || len(t.Notify) > 0 {
			l.add(nodeErr(l.file, v, "meta: %s takes no args, register, loop, until or notify", t.Meta))
		}
		if len(l.errs) != before {
			return nil
		}
		return t
	}
	if modKey == nil && !refused && len(l.errs) == before {
		l.add(nodeErr(l.file, v, "%s has no module: add one of %s", label, strings.Join(module.Names(), ", ")))
	}
	if handler && t.Name == "" {
		l.add(nodeErr(l.file, v, "handler needs a name: notify finds handlers by name"))
	}
	l.checkUntil(t)
	if modKey != nil {
		var err error
		if modVal, err = l.kvArgs(t, modVal); err != nil {
			l.add(err)
			return nil
		}
	}
	if modKey != nil && argsKey != nil {
		var err error
		if modVal, err = l.mergeArgs(modVal, argsKey, argsVal); err != nil {
			l.add(err)
		}
	}
	if modKey != nil {
		var err error
		if t.Args, err = l.args(t, modKey, modVal); err != nil {
			l.add(err)
		}
	}
	if len(l.errs) != before || modKey == nil {
		return nil
	}
	return t
}

// searchDirs is the search path of a task read now (Task.searchDirs).
func (l *loader) searchDirs() []string {
	var out []string
	if l.curRole != nil {
		out = append(out, l.curRole.Path)
	}
	out = append(out, filepath.Dir(l.file), l.playDir)
	return dedupeStrings(out)
}

// mergeArgs adds the mapping of a task's args: to its module's arguments
// (a free-form string becomes cmd).
func (l *loader) mergeArgs(modVal, argsKey, argsVal *yaml.Node) (*yaml.Node, error) {
	a := yamlx.Deref(argsVal)
	if yamlx.IsNull(a) {
		return modVal, nil
	}
	if a.Kind != yaml.MappingNode {
		return modVal, nodeErr(l.file, argsVal, "args must be a mapping of the module's arguments, got %s", yamlx.KindName(a))
	}
	m := yamlx.Deref(modVal)
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: argsKey.Line, Column: argsKey.Column}
	switch {
	case yamlx.IsNull(m):
	case m.Kind == yaml.ScalarNode:
		out.Line, out.Column = m.Line, m.Column
		out.Content = append(out.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "cmd", Line: m.Line, Column: m.Column}, m)
	case m.Kind == yaml.MappingNode:
		out.Line, out.Column = m.Line, m.Column
		out.Content = append(out.Content, m.Content...)
	default:
		return modVal, nodeErr(l.file, modVal, "arguments must be a mapping or a free-form string, got %s", yamlx.KindName(m))
	}
	out.Content = append(out.Content, a.Content...)
	return out, nil
}

// taskKeyword reads one of the task keywords nodeconverge runs; done is
// false when key is not one of them.
func (l *loader) taskKeyword(t *Task, key string, k, val *yaml.Node) (done bool, err error) {
	switch key {
	case "name":
		t.Name, err = l.str(val, "task name")
	case "notify":
		t.Notify, l.notifyAt[t], err = l.stringList(val, "notify", false)
	case "listen":
		if !t.Handler {
			return true, nodeErr(l.file, k, "listen: only a handler listens")
		}
		t.Listen, _, err = l.stringList(val, "listen", false)
	case "tags":
		t.Tags, _, err = l.stringList(val, "tags", true)
	case "timeout":
		t.Timeout, err = l.timeout(val)
	case "no_log":
		t.NoLog, err = l.noLog(val)
		l.noLogSet[t] = true
	case "when":
		t.When, err = l.conds(val, "when")
	case "changed_when":
		t.ChangedWhen, err = l.conds(val, "changed_when")
	case "failed_when":
		t.FailedWhen, err = l.conds(val, "failed_when")
	case "until":
		t.Until, err = l.conds(val, "until")
		t.untilAt = k
		if t.Attempts == 0 {
			// Ansible's default: three attempts.
			t.Attempts = 3
		}
		if err == nil && len(t.Until) == 0 {
			err = nodeErr(l.file, val, "until: give the condition the task is run again until")
		}
	case "retries":
		var n int
		if n, err = l.count(val, "retries", maxRetries); err == nil {
			// Ansible runs the task once, then retries that many times;
			// a retries of 0 or less is one attempt.
			t.Attempts = max(n, 0) + 1
			if n <= 0 {
				t.Attempts = 1
			}
		}
	case "delay":
		var n int
		if n, err = l.count(val, "delay", maxDelay); err == nil {
			if n < 0 {
				// Ansible's delay for a negative one.
				n = 1
			}
			t.Delay = time.Duration(n) * time.Second
			t.delaySet = true
		}
	case "register":
		t.Register, err = l.str(val, "register")
		if err == nil && !varNameRe.MatchString(t.Register) {
			err = nodeErr(l.file, val, "register: %q is not a variable name (letters, digits and _)", t.Register)
		}
	case "ignore_errors":
		if x := yamlx.Deref(val); x != nil && x.Kind == yaml.ScalarNode && jinja.Has(x.Value) {
			t.IgnoreErrorsWhen, err = l.conds(val, "ignore_errors")
		} else {
			t.IgnoreErrors, err = l.boolean(val, "ignore_errors")
		}
	case "check_mode":
		var b bool
		if b, err = l.boolean(val, "check_mode"); err == nil {
			t.CheckMode = &b
		}
	case "become":
		var b bool
		if b, err = l.boolean(val, "become"); err == nil {
			t.Become = &b
		}
	case "become_user":
		var u string
		if u, err = l.str(val, "become_user"); err == nil && u != "root" {
			err = nodeErr(l.file, val, "become_user: %q: a task becomes root or no one (nodeconverge runs a host's tasks over one connection); run as another user with command (argv: [runuser, -u, %s, --, ...])", u, u)
		}
	case "vars":
		t.Vars, err = l.vars(val)
	case "loop_control":
		err = l.loopControl(t, val)
	case "environment":
		if err = l.checkEnvironment(t, val); err == nil {
			t.Environment = append(t.Environment, val)
		}
	case "with_dict", "with_subelements":
		if t.Loop != nil {
			return true, nodeErr(l.file, k, "a task has one loop: give loop or %s, not both", key)
		}
		var conv *yaml.Node
		if conv, err = l.withLoop(key, val); err == nil {
			err = l.loop(t, conv)
		}
	case "with_first_found":
		if t.Loop != nil {
			return true, nodeErr(l.file, k, "a task has one loop: give one of loop, with_items, with_first_found")
		}
		if v := yamlx.Deref(val); v == nil || v.Kind != yaml.SequenceNode && v.Kind != yaml.MappingNode {
			return true, nodeErr(l.file, val, "with_first_found must be a list of file names or a mapping with files and paths, got %s", yamlx.KindName(v))
		}
		wrapped := val
		if v := yamlx.Deref(val); v.Kind == yaml.MappingNode {
			wrapped = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: v.Line, Column: v.Column, Content: []*yaml.Node{v}}
		}
		if err = l.loop(t, wrapped); err == nil {
			t.firstFound = true
		}
	case "loop", "with_items":
		if t.Loop != nil {
			return true, nodeErr(l.file, k, "a task has one loop: give loop or with_items, not both")
		}
		err = l.loop(t, val)
		if key == "with_items" && err == nil && yamlx.Deref(val).Kind == yaml.SequenceNode {
			t.flatten = true
		}
	default:
		return false, nil
	}
	return true, err
}

// checkEnvironment checks an environment: a mapping of variable names to
// values, or one template that gives one; its templates are parsed and
// what they read counted as the task's (t nil: a play's, counted per task).
func (l *loader) checkEnvironment(t *Task, n *yaml.Node) error {
	v := yamlx.Deref(n)
	switch {
	case v != nil && v.Kind == yaml.ScalarNode && jinja.Has(v.Value):
		if _, err := jinja.Parse(v.Value); err != nil {
			return nodeErr(l.file, n, "environment: %v", err)
		}
	case v != nil && v.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := yamlx.Deref(v.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode || !varNameRe.MatchString(k.Value) {
				return nodeErr(l.file, v.Content[i], "environment: a variable name is letters, digits and _, got %s", yamlx.KindName(k))
			}
			x := yamlx.Deref(v.Content[i+1])
			if x == nil || x.Kind != yaml.ScalarNode {
				return nodeErr(l.file, v.Content[i+1], "environment: %s: the value must be a string, got %s", k.Value, yamlx.KindName(x))
			}
			if jinja.Has(x.Value) {
				if _, err := jinja.Parse(x.Value); err != nil {
					return nodeErr(l.file, x, "environment: %s: %v", k.Value, err)
				}
			}
		}
	case yamlx.IsNull(v):
	default:
		return nodeErr(l.file, n, "environment must be a mapping of names to values, got %s", yamlx.KindName(v))
	}
	if t != nil {
		l.envNames(t, n)
	}
	return nil
}

// envNames records the templates of an environment: as the task's.
func (l *loader) envNames(t *Task, n *yaml.Node) {
	var walk func(*yaml.Node, int)
	walk = func(x *yaml.Node, depth int) {
		x = yamlx.Deref(x)
		if x == nil || depth > 20 {
			return
		}
		if x.Kind == yaml.ScalarNode && jinja.Has(x.Value) {
			if _, err := l.template(t, x.Value); err != nil {
				l.add(nodeErr(l.file, x, "environment: %v", err))
			}
		}
		for _, c := range x.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
}

// loopControl reads loop_control: loop_var and index_var name the item
// and its index; label, pause 0 and extended are accepted (label only
// changes what Ansible prints).
func (l *loader) loopControl(t *Task, n *yaml.Node) error {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.MappingNode {
		return nodeErr(l.file, n, "loop_control must be a mapping (loop_var, index_var, label)")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := yamlx.Deref(v.Content[i]), v.Content[i+1]
		if k == nil {
			continue
		}
		switch k.Value {
		case "loop_var", "index_var":
			name, err := l.str(x, "loop_control "+k.Value)
			if err != nil {
				return err
			}
			if !varNameRe.MatchString(name) {
				return nodeErr(l.file, x, "loop_control %s: %q is not a variable name", k.Value, name)
			}
			if k.Value == "loop_var" {
				t.loopVar = name
			} else {
				t.indexVar = name
			}
		case "label":
			if s := yamlx.Deref(x); s != nil && s.Kind == yaml.ScalarNode && jinja.Has(s.Value) {
				if _, err := jinja.Parse(s.Value); err != nil {
					return nodeErr(l.file, x, "loop_control label: %v", err)
				}
			}
		case "extended", "extended_allitems":
			if _, err := l.boolean(x, "loop_control "+k.Value); err != nil {
				return err
			}
		case "pause":
			if s := yamlx.Deref(x); s == nil || s.Value != "0" {
				return nodeErr(l.file, x, "loop_control pause: not supported: nodeconverge does not wait on a timer")
			}
		default:
			return nodeErr(l.file, k, "loop_control: unknown key %q (loop_var, index_var, label, extended)", k.Value)
		}
	}
	return nil
}

// loop reads loop: a list (whose items may hold templates) or a template
// that gives a list.
func (l *loader) loop(t *Task, n *yaml.Node) error {
	v := yamlx.Deref(n)
	switch {
	case v == nil || yamlx.IsNull(v):
		return nodeErr(l.file, n, "loop must be a list or a template that gives one")
	case v.Kind == yaml.SequenceNode:
	case v.Kind == yaml.ScalarNode && jinja.Has(v.Value):
	default:
		return nodeErr(l.file, n, "loop must be a list or a template that gives one, got %s", yamlx.KindName(v))
	}
	var problems []error
	var walk func(*yaml.Node, int)
	walk = func(x *yaml.Node, depth int) {
		x = yamlx.Deref(x)
		if x == nil || depth > 50 {
			return
		}
		if x.Kind == yaml.ScalarNode && jinja.Has(x.Value) {
			if _, err := l.template(t, x.Value); err != nil {
				problems = append(problems, nodeErr(l.file, x, "loop: %v", err))
				return
			}
		}
		for _, c := range x.Content {
			walk(c, depth+1)
		}
	}
	walk(v, 0)
	if len(problems) > 0 {
		return problems[0]
	}
	t.Loop = n
	return nil
}

// conds reads a condition: a bare Jinja2 expression, a boolean, or a list
// of them (all must hold).
func (l *loader) conds(n *yaml.Node, what string) ([]*Cond, error) {
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return nil, nil
	}
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	var out []*Cond
	var errs []error
	for _, it := range items {
		s := yamlx.Deref(it)
		if s == nil || s.Kind != yaml.ScalarNode || yamlx.IsNull(s) {
			errs = append(errs, nodeErr(l.file, it, "%s: each condition must be an expression, got %s", what, yamlx.KindName(s)))
			continue
		}
		src := s.Value
		if b, ok := yaml11Bool(s); ok {
			src = map[bool]string{true: "True", false: "False"}[b]
		}
		e, err := jinja.ParseExpr(src)
		if err != nil {
			errs = append(errs, nodeErr(l.file, it, "%s: %v", what, err))
			continue
		}
		out = append(out, &Cond{Expr: e, Src: s.Value, Pos: posOf(l.file, it), Quiet: s.Tag == quietTag})
	}
	if len(errs) > 0 {
		for _, e := range errs[1:] {
			l.add(e)
		}
		return nil, errs[0]
	}
	return out, nil
}

// quietTag marks the condition a templated include_vars is read under
// (Cond.Quiet) in the tasks the loader writes for it.
const quietTag = "!nodeconverge/quiet-include"

// yaml11Bool says whether a condition's scalar is a boolean the way Ansible
// reads it: YAML 1.1 (PyYAML) makes a plain yes/no/on/off/true/false (in
// lower, Title or UPPER case) a boolean, where YAML 1.2 keeps yes/no/on/off
// strings. So `changed_when: no` never reports changed, as in Ansible,
// instead of reading an undefined variable "no". A quoted or !!str-tagged
// "no" stays an expression, as it does in Ansible.
func yaml11Bool(s *yaml.Node) (bool, bool) {
	if s.ShortTag() == "!!bool" {
		v := strings.ToLower(s.Value)
		return v == "true" || v == "yes" || v == "on", true
	}
	if s.Style != 0 || s.ShortTag() != "!!str" {
		return false, false
	}
	switch s.Value {
	case "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return true, true
	case "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return false, true
	}
	return false, false
}

// unknownTaskKey words the error by what the key most likely was meant to
// be: a module name or one of the task keywords.
func (l *loader) unknownTaskKey(k *yaml.Node, key string, haveModule bool) error {
	names := module.Names()
	s := yamlx.Suggest(key, append(append([]string{}, taskKeys...), names...))
	isModule := func(x string) bool {
		i := sort.SearchStrings(names, x)
		return i < len(names) && names[i] == x
	}
	what := "unknown module"
	if (s != "" && !isModule(s)) || (s == "" && haveModule) {
		what = "unknown task key"
	}
	hint := ""
	if s != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", s)
	} else if what == "unknown module" {
		hint = fmt.Sprintf(" (known modules: %s)", strings.Join(names, ", "))
	}
	return nodeErr(l.file, k, "%s %q%s", what, key, hint)
}

func taskLabel(t *Task) string {
	kind := "task"
	if t.Handler {
		kind = "handler"
	}
	if t.Name != "" {
		return fmt.Sprintf("%s %q", kind, t.Name)
	}
	if t.Module != "" {
		return fmt.Sprintf("%s (%s)", kind, t.Module)
	}
	return kind
}

// stringList reads a string or a list of strings; for tags a string may
// hold several, separated by commas, as in Ansible.
func (l *loader) stringList(n *yaml.Node, what string, splitComma bool) ([]string, []*yaml.Node, error) {
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return nil, nil, nil
	}
	var items []*yaml.Node
	switch v.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{v}
	case yaml.SequenceNode:
		items = v.Content
	default:
		return nil, nil, nodeErr(l.file, n, "%s must be a string or a list of strings, got %s", what, yamlx.KindName(v))
	}
	var out []string
	var at []*yaml.Node
	for _, it := range items {
		s := yamlx.Deref(it)
		if s == nil || s.Kind != yaml.ScalarNode || yamlx.IsNull(s) {
			return nil, nil, nodeErr(l.file, it, "%s: each item must be a string, got %s", what, yamlx.KindName(s))
		}
		vals := []string{s.Value}
		if splitComma {
			vals = strings.Split(s.Value, ",")
		}
		for _, x := range vals {
			if x = strings.TrimSpace(x); x != "" {
				out = append(out, x)
				at = append(at, it)
			}
		}
	}
	return out, at, nil
}

// Batches splits host indexes 0..n-1 into the play's serial batches. A
// percentage rounds down but is at least one host, as in Ansible.
func (p *Play) Batches(n int) [][]int {
	if n <= 0 {
		return nil
	}
	size := n
	switch {
	case p.Serial.Count > 0:
		size = p.Serial.Count
	case p.Serial.Percent > 0:
		size = int(p.Serial.Percent / 100 * float64(n))
	}
	size = max(size, 1)
	var out [][]int
	for start := 0; start < n; start += size {
		end := min(start+size, n)
		b := make([]int, 0, end-start)
		for i := start; i < end; i++ {
			b = append(b, i)
		}
		out = append(out, b)
	}
	return out
}

// maxRetries and maxDelay bound until: so a task's retries always end:
// its deadline is its timeout for each attempt, with the delays.
const (
	maxRetries = 1000
	maxDelay   = 3600
)

// checkUntil checks until: once the task's module is known: it runs a
// module that states Retries again (command, shell), never a converge
// module, and not in a loop. Without until:, retries: and delay: do nothing, as in Ansible.
func (l *loader) checkUntil(t *Task) {
	if t.Until == nil {
		t.Attempts, t.Delay = 0, 0
		return
	}
	if !t.delaySet {
		// Ansible's default delay.
		t.Delay = 5 * time.Second
	}
	m, known := module.Lookup(t.Module)
	switch {
	case t.Module != "" && (!known || !m.Retries):
		l.add(nodeErr(l.file, t.untilAt, "until: on %s: not supported: only %s run again; a converge module checks and applies once (a module that must wait for something checks it itself)", t.Module, retried()))
	case t.Loop != nil:
		l.add(nodeErr(l.file, t.untilAt, "until: with a loop: not supported: write one task per item"))
	}
}

// retried names the modules until: runs again (Registration.Retries), for
// the message that refuses it on another.
func retried() string {
	var names []string
	for _, m := range module.All() {
		if m.Retries {
			names = append(names, m.Name)
		}
	}
	switch len(names) {
	case 0:
		return "no module is"
	case 1:
		return names[0] + " is"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are"
}

// count reads a whole number from -hi to hi (retries:, delay:); a
// template is refused: the deadline of the task is known at load.
func (l *loader) count(n *yaml.Node, what string, hi int) (int, error) {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.ScalarNode || yamlx.IsNull(v) {
		return 0, nodeErr(l.file, n, "%s must be a whole number, got %s", what, yamlx.KindName(v))
	}
	if jinja.Has(v.Value) {
		return 0, nodeErr(l.file, n, "%s: %q: a template is not supported here: the task's deadline is known at load; give a number", what, v.Value)
	}
	c, err := strconv.Atoi(strings.TrimSpace(v.Value))
	if err != nil || c > hi || c < -hi {
		return 0, nodeErr(l.file, n, "%s: %q is not a whole number up to %d", what, v.Value, hi)
	}
	return c, nil
}

// metaActions are the meta: actions nodeconverge does, and what it says
// of Ansible's others.
var metaActions = map[string]string{
	"flush_handlers":    "",
	"noop":              "",
	"end_play":          "not supported: a play runs every task on every host it has not failed on; split the playbook, or guard the tasks with when:",
	"end_host":          "not supported: guard the tasks with when: (a block's when: reaches all of them)",
	"end_batch":         "not supported: a batch runs every task; guard the tasks with when:",
	"clear_host_errors": "not supported: a failed host's run is rolled back and it leaves the run",
	"clear_facts":       "not supported: facts are read once per host per run",
	"refresh_inventory": "not supported: the inventory is read once per run",
	"reset_connection":  "not supported: nodeconverge keeps one connection per host per run",
	"role_complete":     "not supported",
}

// meta reads a meta: task's action; "" (recorded) when nodeconverge does
// not do it. flush_handlers runs the handlers notified so far where it
// stands, as Ansible's does; noop does nothing.
func (l *loader) meta(n *yaml.Node, handler bool) string {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.ScalarNode || yamlx.IsNull(v) {
		l.add(nodeErr(l.file, n, "meta: give the action (flush_handlers, noop), got %s", yamlx.KindName(v)))
		return ""
	}
	hint, known := metaActions[v.Value]
	switch {
	case !known:
		l.add(nodeErr(l.file, n, "meta: unknown action %q (nodeconverge does flush_handlers and noop)", v.Value))
		return ""
	case hint != "":
		l.add(nodeErr(l.file, n, "meta: %s is %s", v.Value, hint))
		return ""
	case handler:
		l.add(nodeErr(l.file, n, "meta: %s in a handler: not supported: handlers run where the play flushes them", v.Value))
		return ""
	}
	return v.Value
}

// includeVarsKey is the include_vars key of task mapping m as written
// (the action an unnamed task is listed by).
func includeVarsKey(m *yaml.Node) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := yamlx.Deref(m.Content[i]); k != nil && strings.TrimPrefix(k.Value, fqcnPrefix) == "include_vars" {
			return k.Value
		}
	}
	return "include_vars"
}
