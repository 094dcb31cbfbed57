package report

// HostReport is everything a run says about one host once the host is
// done: what a streaming report writes as one line, so that neither the
// report nor the run has to hold the fleet.
type HostReport struct {
	Host         string        `json:"host"`
	Recap        Recap         `json:"recap"`
	Results      []*TaskResult `json:"results"`
	NotAttempted string        `json:"not_attempted,omitempty"`
	Interrupted  string        `json:"interrupted,omitempty"`
}

// HostSink receives each host's report once the host is done. A sink that
// fails keeps its first error and returns it when it is closed, so a full
// disk fails the run at the end instead of stopping a fleet half way.
type HostSink interface {
	Host(run *Run, hr *HostReport)
}

// Seal hands back the reports of hosts that are done, in the order they
// are given, and, with drop, forgets their results: the run keeps only
// their recap lines, which is what the human recap, the exit code and the
// Prometheus textfile need. A host is sealed once; a second Seal of it
// gives nothing.
func (r *Run) Seal(hosts []string, drop bool) []*HostReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed == nil {
		r.sealed = map[string]bool{}
	}
	idx := map[string]*HostReport{}
	var out []*HostReport
	for _, h := range hosts {
		if r.sealed[h] || idx[h] != nil {
			continue
		}
		r.sealed[h] = true
		hr := &HostReport{Host: h, Recap: *r.recap(h), NotAttempted: r.NotAttempted[h], Interrupted: r.Interrupted[h]}
		idx[h] = hr
		out = append(out, hr)
	}
	if len(out) == 0 {
		return nil
	}
	kept := r.Results[:0]
	if !drop {
		kept = r.Results
	}
	for _, tr := range r.Results {
		if hr := idx[tr.Host]; hr != nil {
			hr.Results = append(hr.Results, tr)
			if drop {
				continue
			}
		}
		if drop {
			kept = append(kept, tr)
		}
	}
	if drop {
		// The tail past the kept results still points at dropped ones.
		clear(r.Results[len(kept):])
		r.Results = kept
	}
	return out
}

// Unsealed lists, in first-seen order, the hosts not sealed yet.
func (r *Run) Unsealed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, h := range r.Hosts {
		if !r.sealed[h] {
			out = append(out, h)
		}
	}
	return out
}
