package runner

// phase is the step of its life a host's run is at (hostRun). The order
// matters: a later phase of the same play implies the earlier ones.
type phase int

const (
	// phaseNew: nothing done yet; no connection.
	phaseNew phase = iota
	// phaseConnected: the host's one connection is dialled.
	phaseConnected
	// phaseLocked: an apply holds the node lock (a check never does).
	phaseLocked
	// phasePlanned: the current play is planned on the host, nothing of
	// it written.
	phasePlanned
	// phaseApply: a step of the current play has written to the host (or
	// queued its writes).
	phaseApply
	// phaseFlushed: what the play's steps queued is on the node.
	phaseFlushed
	// phaseHandlers: the batch's handlers ran on the host.
	phaseHandlers
	// phaseReleased: the lock released and the connection closed.
	phaseReleased
)

var phaseNames = [...]string{"new", "connect", "lock", "plan", "apply", "flush", "handlers", "release"}

// String names the phase as the host's life is told (hostRun).
func (p phase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return "unknown"
	}
	return phaseNames[p]
}

// enter moves the host's run to phase p. Planning a new play starts the
// play's phases again (plan -> apply -> flush -> handlers); the connection
// and the lock are the run's, held from the first play to the release.
func (s *hostRun) enter(p phase) { s.phase = p }

// playWrote says the current play wrote to the host: a host lost after
// that counts towards max_fail_percentage, and a stopped play rolls it
// back.
func (s *hostRun) playWrote() bool { return s.phase >= phaseApply && s.phase < phaseReleased }

// needsLock says the host is connected and an apply's lock is still to be
// taken there.
func (r *runner) needsLock(s *hostRun) bool {
	return !r.o.Check && s.phase >= phaseConnected && s.phase < phaseLocked
}
