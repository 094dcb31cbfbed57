package node

import (
	_ "embed"
	"strings"
)

// The node-side shell lives in sh/*.sh, embedded here: prelude.sh (reads,
// writes, backups, commands, memo; the records are described at prelude in
// script.go), scratch.sh (the private directory and its sweep), main.sh
// (the start and end of every script), lock.sh (the node lock) and
// rollback.sh (the run manifest undone). `make test` lints them with
// shellcheck, and the package's tests run every script under dash and bash.
// The files are sh, not Go text: a newcomer edits them with a shell's
// tools, and shellcheck's directives in them say why each warning it would
// give is intended.

var (
	//go:embed sh/prelude.sh
	preludeSh string
	//go:embed sh/scratch.sh
	scratchSh string
	//go:embed sh/main.sh
	mainSh string
	//go:embed sh/lock.sh
	lockSh string
	//go:embed sh/rollback.sh
	rollbackSh string
)

// shellLib is a library file as scripts carry it: without its comment
// lines (the explanations and shellcheck's directives), which every round
// trip would otherwise send and every node's shell parse. Only whole lines
// whose first non-blank byte is # go: the files hold no here-document or
// multi-line string for such a line to be part of (TestShellLibsKeepCode
// checks that what is left parses and keeps every other line).
func shellLib(src string) string {
	var b strings.Builder
	b.Grow(len(src))
	for line := range strings.Lines(src) {
		if t := strings.TrimLeft(line, " \t"); strings.HasPrefix(t, "#") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}
