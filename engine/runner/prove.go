package runner

import (
	"context"
	"errors"
	"time"

	"nodeconverge/engine/fanout"
	"nodeconverge/engine/module"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
)

// proofsOf are the proofs an Apply made: its result's, or those its error
// carries (module.Proven: a restart whose proof failed).
func proofsOf(res *module.Result, err error) []module.Proof {
	if res != nil && len(res.Proofs) > 0 {
		return res.Proofs
	}
	var pe module.Proven
	if errors.As(err, &pe) {
		return pe.Proofs()
	}
	return nil
}

// ProofTaskPrefix starts the name of the result a check-mode proof adds
// for a task: "prove: restart containerd".
const ProofTaskPrefix = "prove: "

// prove is `--check --prove`: every task and handler of the play whose
// module's registration can Prove proves the running node on each host
// still in the play, whether or not it would run. The proof gets a view
// that can start and remove a pod sandbox but cannot write a file
// (transport.ProveOnly). Each is one result named ProofTaskPrefix+task,
// failed when a proof failed or could not be made; it returns how many
// failed.
func (r *runner) prove(ctx context.Context, p *playbook.Play, active []*hostRun) (failed int) {
	if !r.o.Check || !r.o.Prove {
		return 0
	}
	for _, t := range append(append([]*playbook.Task(nil), p.Tasks...), p.Handlers...) {
		m, ok := lookup(t)
		if !ok {
			continue
		}
		if m.Prove == nil {
			continue
		}
		var hs []*hostRun
		for _, s := range active {
			if !s.out && s.args[t] != nil {
				hs = append(hs, s)
			}
		}
		if len(hs) == 0 {
			continue
		}
		name := ProofTaskPrefix + t.Name
		if r.o.Observer != nil {
			r.o.Observer.TaskStart(name, t.Handler)
		}
		results := make([]*report.TaskResult, len(hs))
		fanout.Each(r.o.Forks, hs, func(i int, s *hostRun) {
			start := time.Now()
			tr := &report.TaskResult{Play: p.Name, Task: name, Module: t.Module, Host: s.host.Name, Handler: t.Handler, NoLog: t.NoLog}
			if r.stopped() {
				tr = r.notStarted(tr)
			} else {
				tr = r.bounded(ctx, s, tr, r.timeoutOf(t), func(ctx context.Context) {
					// A play whose tasks all skipped this host has not
					// connected to it yet.
					h, err := r.connect(ctx, s, p.Become)
					if err != nil {
						tr.Status, tr.Msg = report.Failed, err.Error()
						if r.o.IsUnreachable(err) {
							tr.Status = report.Unreachable
						}
						return
					}
					at(ctx, s, "prove the running node")
					proofs, err := m.Prove(ctx, transport.ProveOnly(h), s.args[t], module.ProveOptions{})
					tr.Proofs = proofs
					switch {
					case err != nil:
						r.checkErr(tr, err)
					default:
						tr.Status = report.OK
						tr.Msg = report.ProofSummary(proofs)
					}
				})
			}
			if r.save != nil {
				r.save.result(p, t, tr)
			}
			tr.Duration = time.Since(start)
			results[i] = tr
			r.run.Add(tr)
			if r.o.Observer != nil {
				r.o.Observer.Result(tr)
			}
		})
		for _, tr := range results {
			if tr.Status == report.Failed || tr.Status == report.Unreachable {
				failed++
			}
		}
	}
	return failed
}
