package runner

import (
	"context"
	"testing"
	"time"
)

// A rollback outside a task's step (after a block's uncaught failure, a
// stopped play, an undecidable flush) runs on the host's context, which
// has no deadline: rollbackContext bounds it by rollbackGrace, and keeps
// a step's own deadline where there is one.
func TestRollbackContextAlwaysHasADeadline(t *testing.T) {
	r := &runner{}
	ctx, done, err := r.rollbackContext(context.Background(), &hostRun{})
	if err != nil {
		t.Fatal(err)
	}
	dl, ok := ctx.Deadline()
	done()
	if !ok || time.Until(dl) > rollbackGrace {
		t.Errorf("a rollback outside a step has deadline %v (set: %v), want at most %s from now", dl, ok, rollbackGrace)
	}
	if ctx.Err() == nil {
		t.Error("done did not release the rollback's context")
	}

	step, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	want, _ := step.Deadline()
	ctx, done, err = r.rollbackContext(step, &hostRun{})
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if got, _ := ctx.Deadline(); !got.Equal(want) {
		t.Errorf("a step's rollback deadline is %v, want the step's own %v", got, want)
	}
}
