package runner

import (
	"strings"
	"testing"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// TestSaverFromHostPlans: the saved plan keeps each host's steps with the
// task they plan (play and task index), marks a host that failed planning
// without quoting a no_log task's message, marks a host a stopped play
// never reached, and is refused for an interrupted run.
func TestSaverFromHostPlans(t *testing.T) {
	const secret = "S3cr3t-saved"
	p := &playbook.Play{Name: "p"}
	write := &playbook.Task{Name: "write", Module: "copy"}
	login := &playbook.Task{Name: "login", Module: "command", NoLog: true}
	p.Tasks = []*playbook.Task{write, login}
	hosts := []*inventory.Host{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}
	sv := newSaver("id", []string{"site.yaml"}, []*playbook.Play{p}, map[*playbook.Play][]*inventory.Host{p: hosts})
	plan := &module.Plan{Files: []module.FileChange{{Action: module.Create, Path: "/etc/a", After: []byte("a\n"), AfterHash: module.Hash([]byte("a\n"))}}}
	sv.result(p, login, &report.TaskResult{Play: "p", Task: "login", Host: "n1", Status: report.Skipped, NoLog: true,
		Plan: &module.Plan{Commands: []string{"login"}}})
	sv.result(p, write, &report.TaskResult{Play: "p", Task: "write", Host: "n1", Status: report.OK, Plan: &module.Plan{}})
	sv.result(p, write, &report.TaskResult{Play: "p", Task: "write", Host: "n2", Status: report.Changed, Plan: plan})
	sv.result(p, login, &report.TaskResult{Play: "p", Task: "login", Host: "n2", Status: report.Failed, NoLog: true, Msg: "failed: " + secret})
	run := report.NewRun("id", true)
	for _, h := range hosts {
		run.Touch(h.Name)
	}
	run.NotAttempt("n3", `play "p" stopped in batch 2`)
	sp, err := sv.plan(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Plays) != 1 || strings.Join(sp.Plays[0].Hosts, ",") != "n1,n2,n3" || len(sp.Plays[0].Tasks) != 2 {
		t.Fatalf("plays = %+v", sp.Plays)
	}
	n1, n2, n3 := sp.Hosts[0], sp.Hosts[1], sp.Hosts[2]
	if len(n1.Steps) != 1 || n1.Steps[0].Task != "login" || n1.Steps[0].TaskIndex != 1 || n1.Failed != "" {
		t.Errorf("n1 = %+v, want the command's step alone (the ok task has none)", n1)
	}
	if len(n2.Steps) != 1 || string(n2.Steps[0].Contents[0].After) != "a\n" || !strings.Contains(n2.Failed, `task "login"`) || strings.Contains(n2.Failed, secret) {
		t.Errorf("n2 = %+v, want its write kept and the host failed without the no_log message", n2)
	}
	if !strings.Contains(n3.Failed, "not planned") || !strings.Contains(n3.Failed, "stopped in batch 2") {
		t.Errorf("n3 = %+v, want it marked not planned", n3)
	}
	run.Interrupt("n1", "nothing in flight; left as its last finished task left it")
	if _, err := sv.plan(run); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("plan of an interrupted run = %v, want a refusal", err)
	}
}
