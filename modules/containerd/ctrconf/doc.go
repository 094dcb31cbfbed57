// Package ctrconf answers questions about a node's containerd configuration
// with the node's own containerd: it never decides from reading files what
// the daemon will do, it stages the files and asks `containerd config dump`.
//
// # Gathering
//
// Gather reads the main config, resolves its `imports` the way containerd's
// LoadConfig does and reads every file it would load: breadth first (a
// file's imports are queued after everything already queued), each path
// loaded once, a glob expanded on the node and sorted. Only an import that
// contains '*' is a glob. A relative explicit import resolves against the
// importing file's directory; a relative glob does too on containerd 2.x,
// but containerd 1.6/1.7 hand it to filepath.Glob as it is, so it resolves
// against the daemon's working directory ("/" under systemd) and Gather
// records a warning. Imported files may import further files and containerd
// follows them; Gather follows them too (one extra Query per nesting level;
// a flat conf.d tree costs two Queries in all). Files that are not valid
// TOML are kept with Parses false: their imports, version and plugin table
// headers are still read line by line, because a file with duplicated
// tables is exactly the file a repair must handle.
//
// # Staging
//
// DumpMany stages any number of variants (the tree, candidates with files
// replaced, added or removed) in one Stage round trip. Every file a variant
// loads is written to the variant's own scratch directory under a short name
// (nc-0000.toml is the main file) and each `imports` is rewritten, in
// place and keeping the file's line count, to the staged names of what it
// resolved to, globs expanded. So no dump can see a live file, candidates
// can add a file that an existing glob picks up, and containerd's error
// positions still match the live file's lines. Staged names in containerd's
// messages are mapped back to live paths. Each variant is one
// transport.StageUnit, so a variant identical to one the run already dumped
// (same staged contents, same binary) is answered by the Host (engine/node) without
// running containerd again: a module's live dump is another module's, and
// the plan's candidate is the re-check's when apply left exactly that tree.
//
// # Merge models
//
// containerd 1.x (config version 2) merges files per plugin by whole
// replacement: the last file in load order that mentions a plugin supplies
// that plugin's entire table, and every key it leaves out is a built-in
// default, not an earlier file's value. Top-level scalars are overridden by
// later non-zero values and top-level arrays are appended. containerd 2.x
// (version 3) deep-merges plugin tables, the later file winning per key.
// This package models neither for its answers; both are what the binary on
// the node does, and only the import walk above is modelled, because
// staging needs it.
//
// # Attribution, measured
//
// Explain dumps, in one Stage round trip (Analyze stages the same lazily,
// only what a decision needs): the built-in defaults (an empty
// config of the tree's version), the tree restricted to its first k files
// in load order for every k (the last one is the whole tree), and the tree
// without each imported file. For each effective key it finds the last
// prefix step that changed the key's value or presence. The key's writer is
// the latest file from that step on that writes the same value itself (each
// parseable file is flattened to learn what it writes); if no file spells
// it, a value equal to the default is reported as the default, reset by the
// file of the last change (on 1.x, the file that replaced the plugin table),
// and any other value is attributed to the file of the last change and
// marked inferred. This reading holds for both merge models because it only
// relies on the load order, never on how a step merged.
//
// Shadows come from the ablations: a file shadows when removing it brings
// back effective values it does not write itself. Lost keys are values a
// file writes that are not effective (compared with the final dump; arrays
// count when all their elements are present), each with the file that won
// or dropped it, or "never effective" for a key containerd does not know.
//
// # Secrets
//
// Registry credentials live in the same config. Redact names the keys that
// carry them; Flatten, Diff, Shadow, KeyOrigin and LostKey never show their
// values. Effective.Raw and File.Content are the unredacted bytes and must
// not be displayed.
package ctrconf
