package report

import (
	"strings"
	"testing"

	"nodeconverge/engine/module"
)

// Issue 10, defect 10: a plan whose effective changes are all zero-valued
// fields of new tables printed an "effective config (...):" heading over
// nothing but a count; it says so in one line instead.
func TestPlanDiffNoEmptyHeading(t *testing.T) {
	p := &module.Plan{Effective: []module.EffectiveChange{
		{Key: "plugins.x.runtimes.nvidia.privileged_without_host_devices", After: "false"},
		{Key: "plugins.x.runtimes.nvidia.runtime_root", After: `""`},
	}}
	d := PlanDiff("h", p)
	if strings.Contains(d, "loads it):\n") {
		t.Fatalf("heading over no listed keys:\n%s", d)
	}
	if !strings.Contains(d, "2 new keys, all at their zero value") {
		t.Fatalf("the zero-valued keys are not counted:\n%s", d)
	}
}
