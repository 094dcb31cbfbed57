package runner

import "sync"

// forEach calls fn for every item, at most forks at a time, and returns when
// all calls have. Every fan-out over hosts (planning, tasks, rollbacks) goes
// through it, so the forks bound is kept in one place.
func forEach[T any](forks int, items []T, fn func(i int, it T)) {
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
