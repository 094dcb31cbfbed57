package node

import (
	"context"
	"fmt"
	"path"
	"strings"

	"nodeconverge/engine/transport"
)

// The run manifest.
//
// Apply appends one line per op to StateDir/backups/<RunID>/MANIFEST before
// it performs the op (an intent log: a run killed between the two still
// leaves a line that Rollback can act on). A line is five shell words:
//
//	KIND PATH FROM EXISTED BACKUP
//	write '/etc/containerd/config.toml' '' 1 '/var/lib/nodeconverge/backups/R/etc/containerd/config.toml'
//	write '/etc/sysctl.d/99-inotify.conf' '' 0 ''
//	move '/etc/containerd/disabled/zz.toml' '/etc/containerd/conf.d/zz.toml' 0 ''
//	remove '/etc/x' '' 1 '/var/lib/nodeconverge/backups/R/etc/x'
//	keep '/proc/sys/fs/inotify/max_user_instances' '' 1 '/var/lib/nodeconverge/backups/R/proc/sys/fs/inotify/max_user_instances'
//
// PATH is the file actually changed (a write through a symbolic link names
// the link's target), FROM the source of a move, EXISTED whether PATH
// existed before the op, BACKUP where its previous version was kept ("" when
// the op did not keep one). Words are single-quoted as a shell quotes them,
// so a line is read back with `eval`; a path containing a newline is
// refused rather than recorded ambiguously. A line cut short by a crash has
// no final newline, and `read` drops it, which is right: its op never ran.

// ManifestName is the name of the run manifest inside a run's backup
// directory.
const ManifestName = "MANIFEST"

// rollbackPrelude (sh/rollback.sh) undoes manifest entries. Every undo is idempotent, so a
// Rollback that failed part way can simply be run again:
//   - write/remove of a path that existed: restore the backup atomically
//     (copy into a fresh directory beside the target, rename over it),
//     unless the path is a regular file with the backup's content, mode and
//     owner: then the op did not change it (it failed after its line was
//     written: a write onto an immutable file), nothing is restored and
//     nothing is reported, so a rollback restores only what the run changed
//     and never fails on what it did not;
//   - write of a path that did not exist: remove it if it is there;
//   - move: if the source is gone and the destination is there, move it
//     back; then restore a destination that existed before. A source that
//     still exists means the move never happened;
//   - keep: write the saved content back into the path in place (a kernel
//     setting cannot be renamed over). A kernel that refuses the old value
//     is reported: the setting then stays at the run's value.
//
// Undone paths are printed as O records, failures as X records (the script
// goes on with the other entries).
var rollbackPrelude = shellLib(rollbackSh)

// Rollback undoes every op this run applied on the node outside StateDir, in
// reverse order and in one round trip: files that existed are restored
// atomically from the run's backup, files the run created are removed, moved
// files are moved back. It returns the paths it changed, in the order it
// changed them. Entries it cannot undo (an op that kept no backup) are
// reported in the error after every other entry has been undone; the
// manifest is then kept, so Rollback can be run again. After a complete
// rollback the run's backup directory is renamed aside
// (<RunID>.rolled-back.<time>), so a second Rollback does nothing and later
// Applies of this run start a fresh manifest. A run that applied nothing
// rolls back nothing.
func (h *Host) Rollback(ctx context.Context) ([]string, error) {
	return h.RollbackRun(ctx, h.opts.RunID)
}

// RollbackRun is Rollback for the ops run runID applied on the node: an
// owed restart whose gates fail undoes the run that owed it (killed between
// its write and its handler) as well as its own. runID comes from the node
// (a pending record), so it is checked like this run's id before it names
// a directory.
func (h *Host) RollbackRun(ctx context.Context, runID string) ([]string, error) {
	if runID == h.opts.RunID {
		// Writes still queued never reached the node.
		h.DiscardQueued()
	}
	h.cache.clear()
	if err := h.checkOptions(); err != nil {
		return nil, fmt.Errorf("%s: rollback: %w", h.Host(), err)
	}
	if err := checkRunID(runID); err != nil {
		return nil, fmt.Errorf("%s: rollback: %w", h.Host(), err)
	}
	s := &script{}
	s.line("BK=" + transport.ShellQuote(path.Join(h.opts.StateDir, "backups", runID)))
	s.body.WriteString(rollbackPrelude)
	s.line("_nc_rollback")
	f, _, err := h.run(ctx, "rollback", s)
	if err != nil {
		return nil, err
	}
	var paths, failures []string
	seen := map[string]bool{}
	for {
		hdr, err := f.header()
		if err != nil {
			return paths, fmt.Errorf("%s: rollback: %w", h.Host(), err)
		}
		switch hdr[0] {
		case "O":
			_, p, err := f.readText(hdr)
			if err != nil {
				return paths, fmt.Errorf("%s: rollback: %w", h.Host(), err)
			}
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		case "X":
			i, msg, err := f.readText(hdr)
			if err != nil {
				return paths, fmt.Errorf("%s: rollback: %w", h.Host(), err)
			}
			failures = append(failures, fmt.Sprintf("manifest entry %d: %s", i, strings.TrimSpace(msg)))
		case "Z":
			if err := f.end(); err != nil {
				return paths, fmt.Errorf("%s: rollback: %w", h.Host(), err)
			}
			if len(failures) > 0 {
				return paths, fmt.Errorf("%s: rollback of run %s incomplete (run it again after fixing the cause): %s",
					h.Host(), runID, strings.Join(failures, "; "))
			}
			return paths, nil
		default:
			return paths, fmt.Errorf("%s: rollback: unexpected %s record", h.Host(), hdr[0])
		}
	}
}

// RunID returns the id of the run this Host records backups and the
// manifest under.
func (h *Host) RunID() string { return h.opts.RunID }

// StateDir returns nodeconverge's directory on the node.
func (h *Host) StateDir() string { return h.opts.StateDir }

// ManifestPath returns where the run manifest of runID lives on a node.
func ManifestPath(stateDir, runID string) string {
	return path.Join(stateDir, "backups", runID, ManifestName)
}
