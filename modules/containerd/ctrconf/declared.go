package ctrconf

import "gopkg.in/yaml.v3"

// Declarer is a module whose tasks declare values of containerd's effective
// configuration. `nodeconverge explain --playbook` finds it through the
// module registry, asks what a task declares as written, and places that in
// the Explanation it measured on the node: the command names no module, and
// a new module that declares values is explained by implementing this.
type Declarer interface {
	// Declared decodes a task's arguments as written in the playbook (no
	// variables substituted).
	Declared(args *yaml.Node) (Declaration, error)
}

// Declaration is what one task declares.
type Declaration interface {
	// Place finds each declared value in a measured explanation.
	Place(ex *Explanation) []DeclaredValue
}

// DeclaredValue is one declared value as `nodeconverge explain` shows it:
// what the playbook declares, what the node loads, and which file decides
// it, all from the explanation's measured attribution.
type DeclaredValue struct {
	Key       string `json:"key"`
	DumpKey   string `json:"dump_key"`
	Declared  string `json:"declared"`
	Effective string `json:"effective"`
	InEffect  bool   `json:"in_effect"`
	// DecidedBy is the file whose loading gave the key its value; "" for
	// containerd's built-in default.
	DecidedBy string `json:"decided_by,omitempty"`
	// ResetBy is, for a default, the file that put it back (containerd
	// 1.x: the file that replaced the plugin's table).
	ResetBy string `json:"reset_by,omitempty"`
}
