package runner

import (
	"context"
	"fmt"

	"nodeconverge/engine/fanout"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// Blocks with rescue: and always:, as Ansible's linear strategy runs them.
//
// A block's tasks, its rescue and its always are in the play's task list
// one after the other (playbook.Task.Block); each host keeps its state in
// each block it is in, and the batch loop runs a task only on the hosts
// whose state lets it (blockRuns). A task that fails on a host inside a
// block with a rescue sends the host to the rescue: the rest of the
// block's tasks do not run there, the rescue's do, and when the rescue
// ends without a failure the host goes on with the play, its failure
// counted as rescued (Ansible's recap). A failure no rescue catches runs
// the always sections of the blocks it leaves, then fails the host.
//
// Host atomicity: a rescued failure is handled like ignore_errors, by the
// playbook's own decision: nothing is rolled back, and the rescue runs on
// the node as the failure left it (as in Ansible, whose rescues are
// written for that node: they clean it up or try another way). A failure
// that no rescue catches rolls the host's whole run back, as any failure
// does, once the always sections it runs are over: they see the node as
// the failure left it, and what they write is rolled back too.
// Rollbacks are per run, not per block, because the node keeps each
// file's content from before the run, not from before each block.

// blockState is a host's state in a block.
type blockState int

const (
	// blockRescuing: a task of the block failed, its rescue runs.
	blockRescuing blockState = iota + 1
	// blockFailing: a failure no rescue of the block catches; its always
	// runs, then the failure goes on to the enclosing block.
	blockFailing
	// blockLeft: the failure has gone on past the block; nothing more of
	// it runs on the host.
	blockLeft
)

// blockRun is a host's state in one block, and the failure that put it
// there (reported, and rolled back, when the failure leaves the block).
type blockRun struct {
	state  blockState
	failed *report.TaskResult
}

// sections says which of a block's sections have tasks in the play as
// it runs (--tags may leave a rescue without any: then it catches
// nothing, as in Ansible).
type sections struct{ rescue, always bool }

// setBlocks records the sections of the play's blocks.
func (r *runner) setBlocks(p *playbook.Play) {
	if r.blockHas == nil {
		r.blockHas = map[*playbook.Block]sections{}
	}
	for _, t := range p.Tasks {
		t.Chain(func(b *playbook.Block, sec playbook.Section) bool {
			has := r.blockHas[b]
			has.rescue = has.rescue || sec == playbook.InRescue
			has.always = has.always || sec == playbook.InAlways
			r.blockHas[b] = has
			return true
		})
	}
}

// blockRuns says whether t runs on s, given the host's state in the
// blocks t is in: a block's own tasks until one fails, its rescue after
// one failed, its always unless a failure already went on past it.
func (r *runner) blockRuns(s *hostRun, t *playbook.Task) bool {
	runs := true
	t.Chain(func(b *playbook.Block, sec playbook.Section) bool {
		var st blockState
		if br := s.blocks[b]; br != nil {
			st = br.state
		}
		switch sec {
		case playbook.InBlock:
			runs = st == 0
		case playbook.InRescue:
			runs = st == blockRescuing
		default:
			runs = st != blockLeft
		}
		return runs
	})
	return runs
}

// guarded says a failure of t does not end the host's run at once: a
// rescue catches it, or an always runs first. Such a failure rolls
// nothing back when it happens (catch decides).
func (r *runner) guarded(t *playbook.Task) bool {
	if t == nil {
		return false
	}
	out := false
	t.Chain(func(b *playbook.Block, sec playbook.Section) bool {
		has := r.blockHas[b]
		out = sec == playbook.InBlock && (has.rescue || has.always) || sec == playbook.InRescue && has.always
		return !out
	})
	return out
}

// rescues says a failure of t is caught by the rescue of a block it is
// in, now or after inner always sections ran: Ansible's recap counts it
// as rescued, not failed.
func (r *runner) rescues(t *playbook.Task) bool {
	if t == nil {
		return false
	}
	out := false
	t.Chain(func(b *playbook.Block, sec playbook.Section) bool {
		out = sec == playbook.InBlock && r.blockHas[b].rescue
		return !out
	})
	return out
}

// catch takes a failure of t on s into the blocks t is in: it says
// whether the host stays in the play (a rescue or an always runs next).
// A rescue that catches it gives the host ansible_failed_task and
// ansible_failed_result, as Ansible does.
func (r *runner) catch(s *hostRun, t *playbook.Task, tr *report.TaskResult) bool {
	if t == nil || t.Block == nil {
		return false
	}
	if !r.raise(s, t.Block, t.Section, tr) {
		return false
	}
	// The rest of the play was planned as if t succeeded.
	s.replan = true
	if r.rescues(t) {
		if s.registered == nil {
			s.registered = map[string]any{}
		}
		s.registered["ansible_failed_task"] = map[string]any{"name": t.Name, "action": t.Module}
		s.registered["ansible_failed_result"] = resultVar(tr)
	}
	return true
}

// raise walks a failure from section sec of block b outwards: the first
// block that has a rescue for it, or an always to run first, keeps the
// host; each block it leaves runs nothing more there.
func (r *runner) raise(s *hostRun, b *playbook.Block, sec playbook.Section, tr *report.TaskResult) bool {
	if s.blocks == nil {
		s.blocks = map[*playbook.Block]*blockRun{}
	}
	for ; b != nil; b, sec = b.Parent, b.Within {
		has := r.blockHas[b]
		switch {
		case sec == playbook.InBlock && has.rescue:
			s.blocks[b] = &blockRun{state: blockRescuing, failed: tr}
			return true
		case sec != playbook.InAlways && has.always:
			s.blocks[b] = &blockRun{state: blockFailing, failed: tr}
			return true
		}
		s.blocks[b] = &blockRun{state: blockLeft, failed: tr}
	}
	return false
}

// leaveBlocks ends, on the active hosts, the blocks the play leaves
// between task prev and task next (nil: the play's end), innermost first.
// A host whose failure is still going on (an always ran for it) takes it
// to the enclosing block; one that leaves the play's last block with it
// fails there: its run is rolled back and it is out. It returns the hosts
// still in and how many failed.
func (r *runner) leaveBlocks(ctx context.Context, prev, next *playbook.Task, active []*hostRun) ([]*hostRun, int) {
	if prev == nil || prev.Block == nil {
		return active, 0
	}
	staying := map[*playbook.Block]bool{}
	if next != nil {
		next.Chain(func(b *playbook.Block, _ playbook.Section) bool {
			staying[b] = true
			return true
		})
	}
	var left []*playbook.Block
	prev.Chain(func(b *playbook.Block, _ playbook.Section) bool {
		if !staying[b] {
			left = append(left, b)
		}
		return true
	})
	if len(left) == 0 {
		return active, 0
	}
	var still []*hostRun
	var lost []*hostRun
	for _, s := range active {
		out := false
		for _, b := range left {
			br := s.blocks[b]
			delete(s.blocks, b)
			if br != nil && br.state == blockFailing && !r.raise(s, b.Parent, b.Within, br.failed) {
				out = true
				s.failedBy = br.failed
				break
			}
		}
		if out {
			lost = append(lost, s)
		} else {
			still = append(still, s)
		}
	}
	fanout.Each(r.o.Forks, lost, func(_ int, s *hostRun) {
		// The failure's own result has been reported (and counted):
		// the rollback is added to it and said once more at the end.
		tr := s.failedBy
		s.out = true
		before := tr.Msg
		r.rollback(ctx, s, tr)
		if tr.Msg != before {
			r.run.AddNote(fmt.Sprintf("%s: task %q failed and no rescue caught it; after the always tasks ran: %s", s.host.Name, tr.Task, lastLine(tr.Shown().Msg)))
		}
	})
	failed := 0
	for _, s := range lost {
		if countsAsFailure(s.failedBy, s) {
			failed++
		}
		s.failedBy = nil
	}
	return still, failed
}

// lastLine is the last line of s.
func lastLine(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}

// inOrder is the hosts of keep in the order of all.
func inOrder(all, keep []*hostRun) []*hostRun {
	in := make(map[*hostRun]bool, len(keep))
	for _, s := range keep {
		in[s] = true
	}
	out := make([]*hostRun, 0, len(keep))
	for _, s := range all {
		if in[s] {
			out = append(out, s)
		}
	}
	return out
}

// blameOf is the task a failure on s belongs to: t, or the later task
// planning found would fail (hostRun.blame).
func blameOf(s *hostRun, t *playbook.Task) *playbook.Task {
	if s.blame != nil {
		return s.blame
	}
	return t
}
