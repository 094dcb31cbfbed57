package ctrconf

import (
	"context"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

// TestDecidedByAgreesWithExplain: on the incident's tree, what a report
// says decides each effective value (from the files' text) is what
// explain measures with the node's containerd, 1.6 (replaces a plugin's
// table) and 2.x (merges keys): the file that set it, or, for a default a
// file put back, that file.
func TestDecidedByAgreesWithExplain(t *testing.T) {
	for _, g := range []struct {
		name string
		bin  func(t *testing.T) string
	}{
		{"1.6", func(*testing.T) string { return "" }},
		{"2.x", func(t *testing.T) string { return labtest.Containerd(t, labtest.Containerd2) }},
	} {
		t.Run(g.name, func(t *testing.T) { decidedByAgrees(t, g.bin(t), g.name == "1.6") })
	}
}

func decidedByAgrees(t *testing.T, bin string, replacesTables bool) {
	mainPath, _ := incident(t)
	h := newLocal(t)
	tree, err := Gather(context.Background(), h, mainPath, bin)
	if err != nil {
		t.Fatal(err)
	}
	x, err := ExplainTree(context.Background(), h, tree)
	if err != nil {
		t.Fatal(err)
	}
	if !x.OK {
		t.Fatalf("Explain: %s", x.Err)
	}
	checked := 0
	for _, k := range x.Keys {
		if k.Inferred || NotASetting(k.Key) {
			continue
		}
		got := tree.DecidedBy(k.Key)
		switch {
		case k.File != "" && k.Default && k.ResetBy == "":
			// The value is the default and a file writes it too: the
			// dumps cannot tell which, the text can (on 1.x, a later file
			// may have replaced the table the value was written in).
			if got != "set by "+k.File && !strings.HasPrefix(got, "containerd's") {
				t.Errorf("%s: DecidedBy %q, explain measured the default, written by %s", k.Key, got, k.File)
			}
		case k.File != "":
			if got != "set by "+k.File {
				t.Errorf("%s: DecidedBy %q, explain measured it set by %s", k.Key, got, k.File)
			}
		case k.ResetBy != "":
			if !strings.Contains(got, "put back by "+k.ResetBy) {
				t.Errorf("%s: DecidedBy %q, explain measured the default put back by %s", k.Key, got, k.ResetBy)
			}
		default:
			if !strings.HasPrefix(got, "containerd's") {
				t.Errorf("%s: DecidedBy %q, explain measured the built-in default", k.Key, got)
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d keys compared", checked)
	}
	if got := tree.DecidedBy(sandbox); replacesTables && !strings.Contains(got, "put back by") {
		t.Errorf("sandbox_image on 1.x: %q, want the registry drop-in that put the default back", got)
	}
}
