// Package fanout is the one way nodeconverge works on many hosts at once:
// the runner's planning, tasks and rollbacks, saved-plan applies and
// explain all go through Each, so the forks bound (-f) means the same
// everywhere and lives in one place.
package fanout

import "sync"

// Each calls fn for every item, at most forks at a time (at least one), and
// returns when all calls have. fn gets the item's index so results can be
// written into a slice without a lock.
func Each[T any](forks int, items []T, fn func(i int, it T)) {
	if forks < 1 {
		forks = 1
	}
	sem := make(chan struct{}, forks)
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i, it)
		}()
	}
	wg.Wait()
}
