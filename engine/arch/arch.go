// Package arch states how nodeconverge's packages are layered, so that the
// rule is data a test checks (arch_test.go) instead of a habit: data goes
// one way (docs/design.md, "Data flow"), a module never reaches into the
// runner, and the runner never knows a module by name.
//
// Every package of the module has a layer. A package may import only
// packages of a lower layer, with two exceptions: the packages under
// modules/ share a layer and may import one another (a module built on
// another's helpers: shell on command, lineinfile on edit), and no engine
// package but engine/app imports a module (the runner finds modules in the
// registry, never by name). Tooling (lab/, bench/, e2e/, contrib/) sits
// above everything, may import anything, and nothing else imports it. A
// package's tests may also use packages of its own layer (a module's test
// renders its arguments with the playbook loader).
package arch

import "strings"

// Layers maps a package path (relative to the module, a trailing "/"
// naming every package below it) to its layer. The longest matching entry
// wins.
var Layers = map[string]int{
	// The vocabulary and leaf helpers: they import nothing of ours.
	"engine/transport": 0,
	"engine/fanout":    0,
	"engine/yamlx":     0,
	"engine/inputs":    0,
	"engine/redact":    0,
	"engine/vault":     0,
	"engine/safetext":  0,
	"engine/fnmatch":   0,
	// What modules and the runner are written in, and the connections.
	"engine/module":     1,
	"engine/jinja":      1,
	"engine/node":       1,
	"engine/inventory":  1,
	"engine/facts":      1,
	"engine/transport/": 1,
	// Data the runner works on, and the modules themselves.
	"engine/overlay":   2,
	"engine/playbook":  2,
	"engine/report":    2,
	"engine/savedplan": 2,
	"modules/":         2,
	// The runner drives modules it finds in the registry.
	"engine/runner": 3,
	// The application wires inputs, connections, modules and the runner.
	"engine/app":  4,
	"engine/arch": 4,
	// The command line.
	"cmd/": 5,
	// Tooling.
	"lab/":    6,
	"bench/":  6,
	"e2e":     6,
	"e2e/":    6,
	"contrib": 6,
}

// tooling is the layer of lab/, bench/, e2e/ and contrib/.
const tooling = 6

// Layer is the layer of package path rel (relative to the module), and
// whether it has one.
func Layer(rel string) (int, bool) {
	best, layer := -1, 0
	for k, l := range Layers {
		match := rel == k || strings.HasSuffix(k, "/") && strings.HasPrefix(rel, k)
		if match && len(k) > best {
			best, layer = len(k), l
		}
	}
	return layer, best >= 0
}

// Allowed says whether package from may import package to (both relative
// to the module).
func Allowed(from, to string) bool {
	lf, okf := Layer(from)
	lt, okt := Layer(to)
	switch {
	case !okf || !okt:
		return false
	case lf == tooling:
		return true
	case strings.HasPrefix(to, "modules/"):
		return strings.HasPrefix(from, "modules/") || from == "engine/app"
	}
	return lt < lf
}

// AllowedInTest says whether the tests of package from may import package
// to: what the package may, anything of its own layer or below, and
// tooling (lab/labtest).
func AllowedInTest(from, to string) bool {
	lf, okf := Layer(from)
	lt, okt := Layer(to)
	return Allowed(from, to) || okf && okt && (lt <= lf || lt == tooling)
}

// Drivers are the packages that drive modules: the command line, the
// application, the playbook loader and the runner. What a module can do is
// stated in its module.Registration (engine/module/registration.go), and a
// driver reads it there: it never type-asserts a value to an interface a
// module could implement (an interface literal, or an interface declared
// in engine/module or under modules/) to find out. arch_test.go checks it.
var Drivers = []string{"cmd/", "engine/app", "engine/playbook", "engine/runner"}

// DriverAssertions are the exceptions to that rule, by driver package, as
// "import path relative to the module.Interface", each with its reason.
var DriverAssertions = map[string]map[string]string{
	"engine/app": {
		// A domain capability of containerd's modules, asked for only by
		// `explain --playbook` (engine/app): the engine's own contract,
		// engine/module, cannot name containerd's Explanation.
		"modules/containerd/ctrconf.Declarer": "explain places a task's declared containerd values",
	},
}
