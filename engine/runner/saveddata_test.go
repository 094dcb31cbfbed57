package runner_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"nodeconverge/engine/report"
	"nodeconverge/engine/runner"
)

// TestSavedPlanRefusesDataItsApplyCannotRead: a saved step whose Data does
// not decode into its module's declared plan state (an edited file, a plan
// of another build) refuses its host before anything is written there,
// naming the step; the host whose plan is intact is applied.
func TestSavedPlanRefusesDataItsApplyCannotRead(t *testing.T) {
	for _, c := range []struct {
		name, data, want string
	}{
		{"unknown field", `{"argv":["true"],"shell":"reboot"}`, `unknown field "shell"`},
		{"wrong type", `{"argv":"touch x"}`, "cannot unmarshal string"},
		{"two values", `{"argv":["true"]} {"argv":["reboot"]}`, "more than one JSON value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "h1", "h2")
			e.write("h1", "conf", "old\n")
			e.write("h2", "conf", "old\n")
			plays := e.load("- hosts: all\n  tasks:\n" + copyTask("change", "conf", "new\\n") +
				"    - name: mark\n      command:\n        cmd: \"touch {{ dir }}/{{ inventory_hostname }}.ran\"\n")
			_, sp := e.plan(plays, nil)
			edited := false
			for hi := range sp.Hosts {
				if sp.Hosts[hi].Host != "h1" {
					continue
				}
				for si := range sp.Hosts[hi].Steps {
					if st := &sp.Hosts[hi].Steps[si]; st.Task == "mark" {
						if !json.Valid(st.Plan.Data) {
							t.Fatalf("the command's saved Data is not JSON: %q", st.Plan.Data)
						}
						st.Plan.Data, edited = []byte(c.data), true
					}
				}
			}
			if !edited {
				t.Fatal("no saved step mark on h1")
			}
			run, err := runner.ApplySaved(context.Background(), e.inv, sp, e.options(false))
			if err != nil {
				t.Fatal(err)
			}
			var refused *report.TaskResult
			for _, tr := range run.Results {
				if tr.Host == "h1" && tr.Status == report.Failed {
					refused = tr
				}
			}
			if refused == nil || !strings.Contains(refused.Msg, `saved plan of "mark": plan data: `) || !strings.Contains(refused.Msg, c.want) {
				t.Fatalf("h1's results %+v: want it refused naming the step and %q", results(t, run), c.want)
			}
			if got, _ := e.read("h1", "conf"); got != "old\n" {
				t.Errorf("h1.conf = %q: the refused host was written", got)
			}
			if _, ran := e.read("h1", "ran"); ran {
				t.Error("the command ran on the refused host")
			}
			if got, _ := e.read("h2", "conf"); got != "new\n" {
				t.Errorf("h2.conf = %q: the intact host was not applied", got)
			}
			if _, ran := e.read("h2", "ran"); !ran {
				t.Error("the command did not run on the intact host")
			}
		})
	}
}
