package node

import (
	"os/exec"
	"strings"
	"testing"
)

// TestShellLibsKeepCode: shellLib drops the comment lines of a library
// file and nothing else, and every library as scripts carry it parses
// under dash and bash (a comment dropped from inside a continued line or
// a multi-line string would show here).
func TestShellLibsKeepCode(t *testing.T) {
	if got, want := shellLib("# head\na() {\n\t# why\n\techo '#x' # tail\n}\n"), "a() {\n\techo '#x' # tail\n}\n"; got != want {
		t.Errorf("shellLib = %q, want %q", got, want)
	}
	libs := map[string][2]string{
		"prelude.sh": {preludeSh, prelude}, "scratch.sh": {scratchSh, scratchPrelude}, "main.sh": {mainSh, mainPrelude},
		"lock.sh": {lockSh, lockPrelude}, "rollback.sh": {rollbackSh, rollbackPrelude},
	}
	for name, l := range libs {
		src, carried := l[0], l[1]
		var code []string
		for line := range strings.Lines(src) {
			if !strings.HasPrefix(strings.TrimLeft(line, " \t"), "#") {
				code = append(code, line)
			}
		}
		if strings.Join(code, "") != carried {
			t.Errorf("%s: shellLib changed a line that is not a comment", name)
		}
		if strings.Contains(carried, "shellcheck") {
			t.Errorf("%s: a shellcheck directive would be sent to nodes", name)
		}
		for _, sh := range []string{"dash", "bash"} {
			// A function body inside a function, as scripts define
			// lock.sh and rollback.sh.
			cmd := exec.Command(sh, "-n")
			cmd.Stdin = strings.NewReader("_nc_wrap() {\n" + carried + "}\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s under %s: %v\n%s", name, sh, err, out)
			}
		}
	}
}
