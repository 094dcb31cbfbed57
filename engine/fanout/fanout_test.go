package fanout

import (
	"sync/atomic"
	"testing"
)

// TestEachBoundsAndCovers: every item is visited exactly once, never more
// than forks at a time, and a forks below one still makes progress.
func TestEachBoundsAndCovers(t *testing.T) {
	for _, forks := range []int{0, 1, 3, 100} {
		items := make([]int, 50)
		var running, peak atomic.Int64
		seen := make([]int, len(items))
		Each(forks, items, func(i int, _ int) {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			seen[i]++
			running.Add(-1)
		})
		limit := int64(max(forks, 1))
		if peak.Load() > limit {
			t.Errorf("forks %d: %d ran at once", forks, peak.Load())
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("forks %d: item %d visited %d times", forks, i, n)
			}
		}
	}
}
