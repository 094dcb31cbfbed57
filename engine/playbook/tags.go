package playbook

import "slices"

// SelectTags keeps the tasks --tags and --skip-tags select, with
// Ansible's rules: no --tags (or "all") selects every task but those
// tagged never; a task tagged always runs unless always is skipped;
// "tagged" and "untagged" select by whether a task has tags; --skip-tags
// wins. A dynamic include (include_role, include_tasks) is itself a task
// Ansible selects by its own tags: when it is not selected, none of its
// tasks runs, not even one tagged always (a role's argument-spec
// validation). Handlers are kept: they run when notified. The plays are
// copies; the loaded ones are not changed.
func SelectTags(plays []*Play, only, skip []string) []*Play {
	out := make([]*Play, 0, len(plays))
	for _, p := range plays {
		c := *p
		c.Tasks = nil
		for _, t := range p.Tasks {
			if t.IncludedBy != nil && !selected(t.IncludedBy.Tags, only, skip) {
				continue
			}
			if selected(t.Tags, only, skip) {
				c.Tasks = append(c.Tasks, t)
			}
		}
		out = append(out, &c)
	}
	return out
}

func selected(tags, only, skip []string) bool {
	has := map[string]bool{}
	for _, t := range tags {
		has[t] = true
	}
	match := func(set []string) bool {
		for _, s := range set {
			switch {
			case s == "all" && !has["never"]:
				return true
			case s == "tagged" && len(tags) > 0:
				return true
			case s == "untagged" && len(tags) == 0:
				return true
			case has[s]:
				return true
			}
		}
		return false
	}
	if len(skip) > 0 && match(skip) {
		return false
	}
	if len(only) == 0 {
		return !has["never"]
	}
	return match(only) || (has["always"] && !slices.Contains(skip, "always"))
}
