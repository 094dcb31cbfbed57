package runner

import (
	"sync"

	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// taskStart tells the observer task t starts on n hosts, and returns what
// to call before each of its results is shown. A task that may be no
// host's at all (one of a templated include's files, playbook.Cond.Quiet)
// is announced with its first result, so a file no host reads shows
// nothing, as in Ansible; any other task at once.
func (r *runner) taskStart(t *playbook.Task, n int) func() {
	if r.o.Observer == nil {
		return func() {}
	}
	var once sync.Once
	start := func() {
		once.Do(func() {
			r.o.Observer.TaskStart(t.Name, t.Handler)
			if ts, ok := r.o.Observer.(report.TaskSizer); ok {
				ts.TaskHosts(n)
			}
		})
	}
	for _, c := range t.When {
		if c.Quiet {
			return start
		}
	}
	start()
	return start
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
