package node

// Scratch directories on the node.
//
// Every script works in a private directory T: copies of the files a Query
// read, the files a Stage lays out for validation (a containerd tree with a
// drop-in's registry password, a copy's candidate), command output. Those
// may hold credentials, so T is made mode 0700 under the state directory
// (StateDir/tmp, itself 0700), not in the node's shared /tmp. The script
// removes T when it ends, on any exit and on HUP, INT, PIPE and TERM (see
// sh/main.sh). Only SIGKILL or a crash of the node can leave T behind, so
// every script also sweeps: a directory in StateDir/tmp is removed when the
// run that made it is gone.
//
// Whose is a directory is in its name, written before mkdir creates it:
//
//	<holder pid>-<holder start>.<shell pid>-<shell start>.<random>
//
// The random part comes with the script ($_nc_rnd), so making T costs a
// mkdir, not a mktemp in a command substitution (a fork more); mkdir fails
// on a name that exists, so T is never a directory someone else made.
// The holder is the process holding the run's connection on the node (see
// the lock: the per-connection sshd, or the controller itself for a local
// connection), the shell is the script's own. Start times (clock ticks
// since boot, /proc/<pid>/stat field 22) rule out pid reuse. A directory is
// kept while both are alive; when the controller is killed its connection's
// sshd exits, so the next run empties the killed run's directories even
// while a command it started (a hung `containerd config dump`) still runs,
// and removes them once their shell is gone. The empty directory of a
// script that outlived its connection is the record by which a stale
// lock's takeover finds that script and ends it before taking the lock
// (lock.go: never two writers).
//
// When the state directory cannot hold T (read-only, or its file system
// full), the script falls back to the system temporary directory, under the
// name nodeconverge.<the same owner fields>.<random>, swept by the same
// rule, so check mode still works on such a node.

// ScratchDirName is the directory under the state directory that holds the
// scripts' private directories.
const ScratchDirName = "tmp"

// scratchPrelude (sh/scratch.sh) makes T (_nc_scratch) and holds the /proc readers the lock
// shares. It reads /proc with the shell's own read, so the few processes
// every script walks cost no fork.
var scratchPrelude = shellLib(scratchSh)
