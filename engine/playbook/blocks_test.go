package playbook

import (
	"strings"
	"testing"
)

// TestBlockSections: a block's tasks, rescue and always are the play's
// tasks in that order, each knowing its block and section (nested blocks
// their parent); the block's keywords reach every section; a block
// without rescue or always is only its keywords.
func TestBlockSections(t *testing.T) {
	plays, err := loadText(t, `- hosts: all
  tasks:
    - block:
        - {name: a, noop_t: {}}
        - block:
            - {name: b, noop_t: {}}
          always:
            - {name: c, noop_t: {}}
      rescue:
        - {name: d, noop_t: {}}
        - block:
            - {name: e, noop_t: {}}
      always:
        - {name: f, noop_t: {}}
      when: x is defined
      tags: [blk]
    - block:
        - {name: g, noop_t: {}}
`)
	if err != nil {
		t.Fatal(err)
	}
	ts := plays[0].Tasks
	var names []string
	for _, x := range ts {
		names = append(names, x.Name)
	}
	if got := strings.Join(names, ""); got != "abcdefg" {
		t.Fatalf("task order %q", got)
	}
	outer := ts[0].Block
	if outer == nil || outer.Parent != nil {
		t.Fatalf("a: block %+v", outer)
	}
	inner := ts[1].Block
	if inner == nil || inner.Parent != outer || inner.Within != InBlock || ts[2].Block != inner || ts[2].Section != InAlways {
		t.Errorf("b, c: not in the inner block's sections: %+v %+v", ts[1], ts[2])
	}
	for i, want := range []Section{InBlock, InBlock, InAlways, InRescue, InRescue, InAlways} {
		if ts[i].Section != want {
			t.Errorf("%s: section %d, want %d", ts[i].Name, ts[i].Section, want)
		}
		if len(ts[i].When) != 1 || len(ts[i].Tags) != 1 {
			t.Errorf("%s: the block's when/tags did not reach it: %v %v", ts[i].Name, ts[i].When, ts[i].Tags)
		}
	}
	if ts[4].Block != outer {
		t.Errorf("e: a plain block in a rescue is in the outer block's rescue")
	}
	if ts[6].Block != nil {
		t.Errorf("g: a block without rescue/always is tracked")
	}
	for i, want := range []bool{false, false, true, true, true, true, false} {
		if ts[i].OnFailure() != want {
			t.Errorf("%s: OnFailure %v", ts[i].Name, !want)
		}
	}
}

// TestBlockRefusals: rescue/always anywhere but on a block, and in a
// handler's block, are refused at their file:line:col.
func TestBlockRefusals(t *testing.T) {
	_, err := loadText(t, `- hosts: all
  tasks:
    - name: not a block
      noop_t: {}
      rescue:
        - {name: x, noop_t: {}}
    - include_tasks: other.yml
      always: []
  handlers:
    - block:
        - {name: h, noop_t: {}}
      rescue:
        - {name: r, noop_t: {}}
`)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		`play.yaml:5:7: task keyword "rescue" is not supported on a task: only a block takes it`,
		`play.yaml:8:7: always: only a block takes it`,
		`play.yaml:12:7: rescue in a handler's block: not supported`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
