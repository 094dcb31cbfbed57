package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"nodeconverge/engine/module"
	"nodeconverge/engine/overlay"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/transport"
)

// A task with a loop runs its module once per item. loopModule wraps the
// task's module, and loopRegistration its registration, so the runner
// handles it like any task: Check plans every
// item, each on the files as the earlier items would leave them, and the
// task's plan is their union; Apply applies the items' plans in order. The
// items' plans are kept in memory with the task's plan (module.Plan.Items):
// a loop's plan is not saved by --out.
type loopModule struct{ inner module.Module }

// lookup is the registration of the module a task runs: its own, or the
// loop around it.
func lookup(t *playbook.Task) (*module.Registration, bool) {
	m, ok := module.Lookup(t.Module)
	if !ok || t.Loop == nil {
		return m, ok
	}
	if l, ok := loops.Load(m); ok {
		return l.(*module.Registration), true
	}
	l, _ := loops.LoadOrStore(m, loopRegistration(m))
	return l.(*module.Registration), true
}

// loops are the loop registrations made so far, by the inner module's.
var loops sync.Map

// loopRegistration is a loop around inner's module. It is as imperative
// as inner, an item's plan is imperative as inner says, and an item cut
// short has its service restored as inner restores it; it states nothing
// else: a loop task reads nothing ahead and proves nothing.
func loopRegistration(inner *module.Registration) *module.Registration {
	reg := &module.Registration{
		Name:       inner.Name,
		Module:     loopModule{inner: inner.Module},
		Imperative: inner.Imperative,
		ImperativePlan: func(p *module.Plan) bool {
			if inner.ImperativePlan == nil {
				return false
			}
			for _, s := range p.Items {
				if inner.ImperativePlan(s) {
					return true
				}
			}
			return false
		},
	}
	if inner.Restore != nil {
		reg.Restore = func(ctx context.Context, h transport.Writer, p *module.Plan) (string, error) {
			return restoreItems(ctx, h, p, inner.Restore)
		}
	}
	return reg
}

// restoreItems restores what each item of a loop's plan may have left
// down (which item was cut short is not known, and a restore brings a
// service up whatever its state): the states it reports, each once, and
// every item's failure.
func restoreItems(ctx context.Context, h transport.Writer, p *module.Plan, restore func(context.Context, transport.Writer, *module.Plan) (string, error)) (string, error) {
	var states []string
	var errs []error
	seen := map[string]bool{}
	for i, ip := range p.Items {
		if ip == nil || ip.Skip != "" || !ip.Changed() {
			continue
		}
		st, err := restore(ctx, h, ip)
		if err != nil {
			errs = append(errs, fmt.Errorf("item %d: %w", i+1, err))
			continue
		}
		if !seen[st] {
			seen[st] = true
			states = append(states, st)
		}
	}
	return strings.Join(states, ", "), errors.Join(errs...)
}

// NewArgs is a loop's arguments: one module.Args per item.
func (l loopModule) NewArgs() module.Args { return &playbook.LoopArgs{} }

// Check plans every item in order over an overlay of the earlier items'
// writes and returns their union.
func (l loopModule) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a, ok := margs.(*playbook.LoopArgs)
	if !ok {
		return nil, fmt.Errorf("loop: arguments are %T", margs)
	}
	ov := overlay.New(h)
	out := &module.Plan{}
	var subs []*module.Plan
	skipped := 0
	for i, args := range a.Args {
		p, err := l.inner.Check(ctx, ov, args)
		if err != nil {
			return nil, fmt.Errorf("item %d (%s): %w", i+1, itemLabel(a.Items[i]), err)
		}
		subs = append(subs, p)
		if p.Skip != "" {
			skipped++
			continue
		}
		if p.Changed() {
			ov.Record(p.Files)
		}
		out.Files = append(out.Files, p.Files...)
		out.Commands = append(out.Commands, p.Commands...)
		out.Restart = append(out.Restart, p.Restart...)
		out.Evidence = append(out.Evidence, p.Evidence...)
		out.Effective = append(out.Effective, p.Effective...)
		out.Drift = append(out.Drift, p.Drift...)
		out.Always = append(out.Always, p.Always...)
		for k, v := range p.Facts {
			if out.Facts == nil {
				out.Facts = map[string]any{}
			}
			out.Facts[k] = v
		}
		if p.Msg != "" {
			out.Msg = strings.TrimPrefix(out.Msg+"\n", "\n") + fmt.Sprintf("item %s: %s", itemLabel(a.Items[i]), p.Msg)
		}
		for _, n := range p.Notes {
			out.Notes = append(out.Notes, fmt.Sprintf("item %s: %s", itemLabel(a.Items[i]), n))
		}
	}
	switch {
	case len(subs) == 0:
		out.Skip = "no item to run (every item's when: was false, or the loop is empty)"
	case skipped == len(subs):
		out.Skip = subs[0].Skip
	}
	// ItemValues is never nil on a loop's plan, even an empty loop's:
	// that is how register tells a loop's plan from any other.
	out.Items, out.ItemValues = subs, append([]any{}, a.Items...)
	return out, nil
}

// Apply applies each changed item's plan in order.
func (l loopModule) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	if len(p.Items) == 0 {
		return nil, errors.New("a loop's plan is applied where it was made (a saved plan cannot hold one)")
	}
	res := &module.Result{ItemValues: p.ItemValues, Items: make([]*module.Result, len(p.Items))}
	var outs []string
	for i, sub := range p.Items {
		if sub.Skip != "" || !sub.Changed() && len(sub.Always) == 0 {
			continue
		}
		r, err := l.inner.Apply(ctx, h, sub)
		res.Items[i] = r
		if r != nil {
			res.Changed = res.Changed || r.Changed
			res.Files = append(res.Files, r.Files...)
			if r.Output != "" {
				outs = append(outs, r.Output)
			}
			res.RC, res.Stdout, res.Stderr = r.RC, r.Stdout, r.Stderr
		}
		if err != nil {
			res.Output = strings.Join(outs, "\n")
			return res, err
		}
	}
	res.Output = strings.Join(outs, "\n")
	return res, nil
}

func itemLabel(it any) string {
	s := fmt.Sprint(it)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
