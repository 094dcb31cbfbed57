package runner_test

import (
	"context"
	"strings"
	"testing"

	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
	_ "nodeconverge/modules/command"
)

const keywordsPlay = `- hosts: all
  tasks:
    - name: probe
      command: "sh -c 'echo hello; echo oops >&2; exit 3'"
      register: out
      failed_when: out.rc not in [0, 3]
      changed_when: false
` + `    - name: only when 3
      when: out.rc == 3 and out.stderr == 'oops'
      test_file:
        path: "{{ dir }}/{{ inventory_hostname }}.a"
        content: "{{ out.stdout | upper }}\n"
        label: a
    - name: never
      when: out.rc == 0
      test_file:
        path: "{{ dir }}/{{ inventory_hostname }}.b"
        label: b
    - name: only h2
      when: inventory_hostname == groups['all'][1] and 'h1' in hostvars
      test_file:
        path: "{{ dir }}/{{ inventory_hostname }}.c"
        content: "{{ undefined_on_h1 | default('c') }}\n"
        label: c
      register: c_result
    - name: fails, ignored
      command: "false"
      ignore_errors: true
      register: f
    - name: after
      when: f is failed and c_result is not changed or inventory_hostname == 'h2'
      test_file:
        path: "{{ dir }}/{{ inventory_hostname }}.d"
        content: "{{ f.rc }}\n"
        label: d
`

// TestTaskKeywords: when (static and on registered results), register
// (.rc, .stdout, .stderr, changed, failed), changed_when, failed_when and
// ignore_errors decide per host, and the recap counts skipped and
// ignored tasks as Ansible does.
func TestTaskKeywords(t *testing.T) {
	e := newEnv(t, "h1", "h2")
	run := e.run(e.load(keywordsPlay), e.options(false))
	res := results(t, run)
	want := map[string]report.Status{
		"probe h1": report.OK, "probe h2": report.OK,
		"only when 3 h1": report.Changed, "only when 3 h2": report.Changed,
		"never h1": report.Skipped, "never h2": report.Skipped,
		"only h2 h1": report.Skipped, "only h2 h2": report.Changed,
		"fails, ignored h1": report.Failed, "fails, ignored h2": report.Failed,
		"after h1": report.Changed, "after h2": report.Changed,
	}
	for k, st := range want {
		if tr := res[k]; tr == nil || tr.Status != st {
			t.Errorf("%s: got %+v, want %s", k, tr, st)
		}
	}
	if tr := res["fails, ignored h1"]; tr == nil || !tr.Ignored {
		t.Errorf("ignore_errors: %+v", tr)
	}
	if got, _ := e.read("h1", "a"); got != "HELLO\n" {
		t.Errorf("h1.a = %q, want the registered stdout", got)
	}
	if got, _ := e.read("h1", "d"); got != "1\n" {
		t.Errorf("h1.d = %q, want false's rc", got)
	}
	if _, ok := e.read("h1", "c"); ok {
		t.Error("a task skipped by when: wrote on h1")
	}
	rc := run.Recap["h1"]
	if rc.OK != 1 || rc.Changed != 2 || rc.Skipped != 2 || rc.Failed != 0 || rc.Ignored != 1 {
		t.Errorf("recap h1 = %+v, want ok=1 changed=2 skipped=2 failed=0 ignored=1", *rc)
	}
	if run.ExitCode() != report.ExitOK {
		t.Errorf("exit %d, want 0: an ignored failure is not a failure", run.ExitCode())
	}

	// Check mode runs no command and skips what reads its result,
	// saying why.
	check := e.run(e.load(keywordsPlay), e.options(true))
	cres := results(t, check)
	if tr := cres["probe h1"]; tr == nil || tr.Status != report.Skipped {
		t.Errorf("check: probe = %+v, want skipped", tr)
	}
	if tr := cres["only when 3 h1"]; tr == nil || tr.Status != report.Skipped || !strings.Contains(tr.Msg, "check mode did not run") {
		t.Errorf("check: only when 3 = %+v", tr)
	}
}

// TestWhenUndefinedFailsAtPreflight: a when: that reads an undefined
// variable (not a registered one) fails the run before any host is
// touched, naming the condition's place.
func TestWhenUndefinedFailsAtPreflight(t *testing.T) {
	e := newEnv(t, "h1")
	plays := e.load("- hosts: all\n  tasks:\n    - name: x\n      when: nope == 1\n" + task("x", "x")[len("    - name: x\n"):])
	_, err := runnerRun(e, plays)
	if err == nil || !strings.Contains(err.Error(), ":4:13: the condition \"nope == 1\" could not be evaluated: undefined variable \"nope\"") {
		t.Errorf("err = %v", err)
	}
	if e.dials.Load() != 0 {
		t.Errorf("dialled %d hosts before failing", e.dials.Load())
	}
}

func runnerRun(e *env, plays []*playbook.Play) (*report.Run, error) {
	return runner.Run(context.Background(), e.inv, plays, e.options(false))
}

const loopPlay = `- hosts: all
  vars:
    names: [x, y, z]
  tasks:
    - name: one file per item
      loop: "{{ names }}"
      when: item != 'z'
      test_file:
        path: "{{ dir }}/{{ inventory_hostname }}.{{ item }}"
        content: "{{ item | upper }}\n"
        label: "{{ item }}"
      register: files
    - name: nested with_items
      with_items:
        - [p]
        - q
      test_file:
        path: "{{ dir }}/{{ inventory_hostname }}.{{ item }}"
        content: "{{ item }}\n"
        label: "{{ item }}"
    - name: every item skipped
      loop: [a]
      when: item == 'b'
      test_file:
        path: "{{ dir }}/{{ inventory_hostname }}.never"
        label: never
    - name: after the loop
      when: files is changed and (files.results | length == 2) and files.results[1].item == 'y' 
      test_file:
        path: "{{ dir }}/{{ inventory_hostname }}.after"
        content: "after\n"
        label: after
`

// TestLoop: loop and with_items run the module once per item (with_items
// flattens one level), when: that reads item decides per item, the task
// counts once, and a second run changes nothing.
func TestLoop(t *testing.T) {
	e := newEnv(t, "h1")
	run := e.run(e.load(loopPlay), e.options(false))
	res := results(t, run)
	for k, st := range map[string]report.Status{"one file per item h1": report.Changed, "nested with_items h1": report.Changed,
		"every item skipped h1": report.Skipped, "after the loop h1": report.Changed} {
		if tr := res[k]; tr == nil || tr.Status != st {
			t.Errorf("%s: got %+v, want %s", k, tr, st)
		}
	}
	for name, want := range map[string]string{"x": "X\n", "y": "Y\n", "p": "p\n", "q": "q\n"} {
		if got, _ := e.read("h1", name); got != want {
			t.Errorf("h1.%s = %q, want %q", name, got, want)
		}
	}
	if _, ok := e.read("h1", "z"); ok {
		t.Error("the item when: excluded was written")
	}
	again := e.run(e.load(loopPlay), e.options(false))
	if rc := again.Recap["h1"]; rc.Changed != 0 || rc.OK != 2 || rc.Skipped != 2 {
		t.Errorf("second run recap = %+v, want ok=2 skipped=2 (after the loop: files not changed)", *rc)
	}
	// An unchanged loop still registers its items.
	plays := e.load(loopPlay + "    - name: items registered\n      when: files.results | map(attribute='item') | join(',') == 'x,y'\n" +
		"      test_file:\n        path: \"{{ dir }}/{{ inventory_hostname }}.reg\"\n        content: \"reg\\n\"\n        label: reg\n")
	third := results(t, e.run(plays, e.options(false)))
	if tr := third["items registered h1"]; tr == nil || tr.Status != report.Changed {
		t.Errorf("items registered: %+v", tr)
	}
}
