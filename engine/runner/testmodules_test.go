package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	"nodeconverge/engine/savedplan"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The runner is tested with two test-only modules that run against real
// files through localconn.New (a real `sh -s`, no SSH) and report what
// the runner asked of them to the current probe.
//
//	test_file     makes a file hold content; fail_on makes Check fail on
//	              the named hosts; writes makes Apply write something else,
//	              so the re-check is not clean.
//	test_restart  a handler: always plans a restart (imperative, like a
//	              service restart); fail_on makes Apply fail on those hosts.
func init() {
	module.Register(module.Registration{Name: "test_file", Module: fileModule{}})
	module.Register(module.Registration{Name: "test_restart", Module: restartModule{}, Imperative: true})
}

// probe records what the test modules were asked to do. Tests run one at a
// time (none calls t.Parallel), and each installs a fresh probe.
type probe struct {
	mu      sync.Mutex
	log     []string
	applies map[string]int // host -> Apply calls of test_file
	// restarts counts test_restart Apply calls per host.
	restarts map[string]int

	inFlight, maxInFlight, entered int
	// gate, when > 0, holds each Check until gate Checks have been in
	// flight at once (or gateHosts Checks have started), so the forks
	// test measures real concurrency instead of hoping for it.
	gate, gateHosts int
	changed         chan struct{}
	timedOut        bool
}

var current atomic.Pointer[probe]

func newProbe(t *testing.T) *probe {
	t.Helper()
	p := &probe{applies: map[string]int{}, restarts: map[string]int{}, changed: make(chan struct{})}
	current.Store(p)
	t.Cleanup(func() { current.Store(nil) })
	return p
}

func (p *probe) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *probe) enter(what string) {
	p.mu.Lock()
	p.log = append(p.log, what)
	p.inFlight++
	p.entered++
	p.maxInFlight = max(p.maxInFlight, p.inFlight)
	p.broadcastLocked()
	// The timeout only turns a deadlock into a test failure; nothing
	// waits on time to order events.
	deadline := time.After(10 * time.Second)
	for p.gate > 0 && p.maxInFlight < p.gate && p.entered < p.gateHosts {
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			p.mu.Lock()
			p.timedOut = true
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
}

func (p *probe) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight--
	p.broadcastLocked()
}

func (p *probe) record(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, what)
}

func (p *probe) entries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func onHost(list, host string) bool {
	return slices.Contains(strings.Split(list, ","), host)
}

type fileArgs struct {
	Path    string  `yaml:"path"`
	Content string  `yaml:"content"`
	FailOn  string  `yaml:"fail_on"`
	Writes  *string `yaml:"writes"`
	Label   string  `yaml:"label"`
}

func (a *fileArgs) Validate() error {
	if a.Path == "" || a.Label == "" {
		return errors.New("path and label are required")
	}
	return nil
}

type fileModule struct{}

func (fileModule) NewArgs() module.Args { return &fileArgs{} }

func (fileModule) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*fileArgs)
	p := current.Load()
	p.enter("check " + a.Label + " " + h.Host())
	defer p.leave()
	if onHost(a.FailOn, h.Host()) {
		return nil, fmt.Errorf("check of %s fails on %s by design", a.Label, h.Host())
	}
	snap, err := h.Query(ctx, transport.Query{Files: []string{a.Path}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", a.Path, err)
	}
	live := snap.File(a.Path)
	if live.Exists && string(live.Content) == a.Content {
		return &module.Plan{}, nil
	}
	fc := module.FileChange{Action: module.Create, Path: a.Path, After: []byte(a.Content), AfterHash: module.Hash([]byte(a.Content)), Mode: 0o644}
	if live.Exists {
		fc.Action, fc.Before, fc.BeforeHash = module.Update, live.Content, module.Hash(live.Content)
	}
	plan := &module.Plan{Files: []module.FileChange{fc}}
	if a.Writes != nil {
		if plan.Data, err = json.Marshal(*a.Writes); err != nil {
			return nil, fmt.Errorf("encode writes: %w", err)
		}
	}
	return plan, nil
}

func (fileModule) Apply(ctx context.Context, h transport.Writer, pl *module.Plan) (*module.Result, error) {
	p := current.Load()
	p.mu.Lock()
	p.applies[h.Host()]++
	p.log = append(p.log, "apply "+pl.Files[0].Path+" "+h.Host())
	p.mu.Unlock()
	content := pl.Files[0].After
	if pl.Data != nil {
		var w string
		if err := json.Unmarshal(pl.Data, &w); err != nil {
			return nil, fmt.Errorf("decode writes: %w", err)
		}
		content = []byte(w)
	}
	if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: pl.Files[0].Path, Content: content, Mode: 0o644}}); err != nil {
		return nil, err
	}
	return &module.Result{Changed: true, Files: pl.Files}, nil
}

type restartArgs struct {
	FailOn string `yaml:"fail_on"`
}

func (*restartArgs) Validate() error { return nil }

type restartModule struct{}

func (restartModule) NewArgs() module.Args { return &restartArgs{} }

func (restartModule) Check(_ context.Context, h transport.Reader, _ module.Args) (*module.Plan, error) {
	current.Load().record("check restart " + h.Host())
	return &module.Plan{Restart: []string{"svc"}}, nil
}

func (restartModule) Apply(ctx context.Context, h transport.Writer, pl *module.Plan) (*module.Result, error) {
	p := current.Load()
	p.mu.Lock()
	p.restarts[h.Host()]++
	p.log = append(p.log, "apply restart "+h.Host())
	p.mu.Unlock()
	// A restart is a command on the node, as containerd_restart's is:
	// the writes the play queued land with it.
	if _, err := h.Exec(ctx, transport.Cmd{Argv: []string{"true"}, Touches: []string{}}); err != nil {
		return nil, err
	}
	return &module.Result{Changed: true}, nil
}

// restartFailModule is test_restart whose Apply fails on fail_on hosts;
// Apply sees only the plan, so the plan carries the verdict from Check.
type restartFailModule struct{ restartModule }

func (restartFailModule) Check(_ context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	current.Load().record("check restart " + h.Host())
	pl := &module.Plan{Restart: []string{"svc"}}
	if onHost(margs.(*restartArgs).FailOn, h.Host()) {
		pl.Data = json.RawMessage(`"fail"`)
	}
	return pl, nil
}

func (m restartFailModule) Apply(ctx context.Context, h transport.Writer, pl *module.Plan) (*module.Result, error) {
	res, err := m.restartModule.Apply(ctx, h, pl)
	if err != nil {
		return nil, err
	}
	if string(pl.Data) == `"fail"` {
		return nil, fmt.Errorf("svc failed its health gates on %s", h.Host())
	}
	return res, nil
}

func init() {
	module.Register(module.Registration{Name: "test_restart_fail", Module: restartFailModule{}, Imperative: true})
}

var errUnreachable = errors.New("no route to host")

// env is one test's world: an inventory of local hosts, a data directory
// the playbooks write under, and a state directory for the lock, pending
// records and backups.
type env struct {
	t           *testing.T
	dir, state  string
	inv         *inventory.Inventory
	dials       atomic.Int64
	unreachable map[string]bool
	p           *probe
}

func newEnv(t *testing.T, hosts ...string) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{t: t, dir: filepath.Join(root, "data"), state: filepath.Join(root, "state"), unreachable: map[string]bool{}, p: newProbe(t)}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("all:\n  hosts:\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "    %s:\n", h)
	}
	invPath := filepath.Join(root, "inventory.yaml")
	if err := os.WriteFile(invPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Load(invPath)
	if err != nil {
		t.Fatal(err)
	}
	e.inv = inv
	return e
}

func (e *env) load(text string) []*playbook.Play {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), "play.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}
	plays, err := playbook.Load(p)
	if err != nil {
		e.t.Fatalf("load playbook: %v", err)
	}
	return plays
}

func (e *env) options(check bool) runner.Options {
	return runner.Options{
		Check:     check,
		Forks:     5,
		ExtraVars: map[string]any{"dir": e.dir},
		Dial: func(_ context.Context, h *inventory.Host, _ bool) (transport.Conn, error) {
			e.dials.Add(1)
			if e.unreachable[h.Name] {
				return nil, fmt.Errorf("dial %s: %w", h.Name, errUnreachable)
			}
			return localconn.New(h.Name), nil
		},
		IsUnreachable: func(err error) bool { return errors.Is(err, errUnreachable) },
		HostOptions:   node.HostOptions{StateDir: e.state},
	}
}

func (e *env) run(plays []*playbook.Play, o runner.Options) *report.Run {
	e.t.Helper()
	run, err := runner.Run(context.Background(), e.inv, plays, o)
	if err != nil {
		e.t.Fatalf("run: %v", err)
	}
	if e.p.timedOut {
		e.t.Fatal("a test module's gate timed out")
	}
	return run
}

// plan is a check run that saves its plan (apply --check --out).
func (e *env) plan(plays []*playbook.Play, playbooks []string) (*report.Run, *savedplan.Plan) {
	e.t.Helper()
	run, sp, err := runner.Plan(context.Background(), e.inv, plays, playbooks, e.options(true))
	if err != nil {
		e.t.Fatalf("plan: %v", err)
	}
	return run, sp
}

// path is the per-host file a test_file task writes.
func (e *env) path(host, name string) string { return filepath.Join(e.dir, host+"."+name) }

func (e *env) write(host, name, content string) {
	e.t.Helper()
	if err := os.WriteFile(e.path(host, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) read(host, name string) (string, bool) {
	e.t.Helper()
	b, err := os.ReadFile(e.path(host, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b), true
}

// results indexes a run's results as "task host" -> result; a handler
// that ran more than once on a host would show up as a duplicate.
func results(t *testing.T, run *report.Run) map[string]*report.TaskResult {
	t.Helper()
	out := map[string]*report.TaskResult{}
	for _, tr := range run.Results {
		k := tr.Task + " " + tr.Host
		if _, dup := out[k]; dup {
			t.Errorf("%s ran twice", k)
		}
		out[k] = tr
	}
	return out
}

func task(name, label string, extra ...string) string {
	s := fmt.Sprintf("    - name: %s\n      test_file:\n        path: \"{{ dir }}/{{ inventory_hostname }}.%s\"\n        content: \"%s\\n\"\n        label: %s\n", name, label, label, label)
	for _, x := range extra {
		s += "        " + x + "\n"
	}
	return s
}
