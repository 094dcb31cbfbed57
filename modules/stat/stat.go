// Package stat is Ansible's `stat`: it reads what a path is and hands it
// to `register:` in Ansible's shape (`st.stat.exists`, `isdir`, `isreg`,
// `islnk`, `mode`, `uid`, `gid`, `size`, `checksum`, `pw_name`, ...). It
// only reads: its plan is always empty, in check mode too, and its result
// is known when the play is planned, so a later `when: not st.stat.exists`
// is decided in the up-front plan.
//
// The path is read with one probe (stat, access, readlink, the checksum
// tool), the path an argument, never shell text. Where an earlier task of
// the play plans to write or remove the path, stat answers with that
// planned state (the overlay's), as the node will be when the task runs:
// check mode and the up-front plan agree with the apply.
package stat

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"path"
	"strconv"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

func init() {
	module.Register(module.Registration{Name: "stat", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// Args are ansible.builtin.stat's arguments.
type Args struct {
	Path              string `yaml:"path"`
	Dest              string `yaml:"dest"`
	Name              string `yaml:"name"`
	Follow            bool   `yaml:"follow"`
	GetChecksum       bool   `yaml:"get_checksum"`
	ChecksumAlgorithm string `yaml:"checksum_algorithm"`
	Checksum          string `yaml:"checksum"`
	ChecksumAlgo      string `yaml:"checksum_algo"`
	// GetMime and GetAttributes are accepted; the values they would add
	// (mimetype, charset, attributes) are not returned: reading one is a
	// template error that names it, never a silent blank.
	GetMime       bool `yaml:"get_mime"`
	GetAttributes bool `yaml:"get_attributes"`
}

var algorithms = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha224": sha256.New224, "sha256": sha256.New, "sha384": sha512.New384, "sha512": sha512.New,
}

// Validate settles the aliases.
func (a *Args) Validate() error {
	n := 0
	for _, p := range []string{a.Path, a.Dest, a.Name} {
		if p != "" {
			n++
			a.Path = p
		}
	}
	a.Dest, a.Name = "", ""
	switch {
	case n == 0:
		return errors.New("path is required")
	case n > 1:
		return errors.New("give path once (dest and name are its aliases)")
	case !path.IsAbs(a.Path):
		return fmt.Errorf("path %q must be an absolute path", a.Path)
	}
	for _, alias := range []string{a.Checksum, a.ChecksumAlgo} {
		if alias != "" {
			a.ChecksumAlgorithm = alias
		}
	}
	a.Checksum, a.ChecksumAlgo = "", ""
	if _, ok := algorithms[a.ChecksumAlgorithm]; !ok {
		return fmt.Errorf("checksum_algorithm %q: one of md5, sha1, sha224, sha256, sha384, sha512", a.ChecksumAlgorithm)
	}
	return nil
}

// Module implements module.Module for stat.
type Module struct{}

// NewArgs returns Ansible's defaults.
func (Module) NewArgs() module.Args {
	return &Args{GetChecksum: true, ChecksumAlgorithm: "sha1", GetMime: true, GetAttributes: true}
}

// probe prints, for $1 (followed when $2 is 1, checksummed with $3sum
// when $3 is set and it is a readable regular file): "absent", or the
// stat line, the access line, the link target and where it resolves, and
// the checksum.
const probe = `p=$1
if [ "$2" = 1 ]; then
	[ -e "$p" ] || { echo absent; exit 0; }
	stat -L -c '%f %u %g %s %i %d %h %.9X %.9Y %.9Z %b %o %U %G' -- "$p" || exit 1
	link=
else
	[ -e "$p" ] || [ -L "$p" ] || { echo absent; exit 0; }
	stat -c '%f %u %g %s %i %d %h %.9X %.9Y %.9Z %b %o %U %G' -- "$p" || exit 1
	[ -L "$p" ] && link=1 || link=
fi
r=0 w=0 x=0
[ -r "$p" ] && r=1
[ -w "$p" ] && w=1
[ -x "$p" ] && x=1
echo "$r $w $x"
if [ -n "$link" ]; then readlink -- "$p"; readlink -f -- "$p" || echo; else echo; echo; fi
if [ -n "$3" ] && [ -z "$link" ] && [ -f "$p" ] && [ "$r" = 1 ]; then
	s=$("$3"sum -- "$p") || exit 1
	echo "${s%% *}"
fi`

func (a *Args) query() transport.Query {
	follow, algo := "0", ""
	if a.Follow {
		follow = "1"
	}
	if a.GetChecksum {
		algo = a.ChecksumAlgorithm
	}
	return transport.Query{Cmds: []transport.Cmd{{Argv: []string{"sh", "-c", probe, "sh", a.Path, follow, algo}, Reads: []string{a.Path}}}}
}

// Prefetch reads the path with the play's other reads.
func (Module) Prefetch(margs module.Args) transport.Query { return margs.(*Args).query() }

// Check reads the path; the plan is empty and carries `stat`.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	snap, err := h.Query(ctx, a.query())
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", a.Path, err)
	}
	if len(snap.Cmds) != 1 {
		return nil, fmt.Errorf("stat %s: no answer", a.Path)
	}
	res := snap.Cmds[0]
	if !res.OK() {
		return nil, fmt.Errorf("stat %s: %s", a.Path, strings.TrimSpace(string(res.Stderr)))
	}
	st, err := parse(a.Path, string(res.Stdout))
	if err != nil {
		return nil, err
	}
	plan := &module.Plan{}
	if f, ok := snap.Files[a.Path]; ok {
		// An earlier task of the play plans this path.
		st = a.planned(st, f)
		plan.Notes = append(plan.Notes, "stat of "+a.Path+" is as an earlier task of the play leaves it")
	}
	plan.Vars = map[string]any{"stat": st}
	return plan, nil
}

// Apply is never called: the plan is always empty.
func (Module) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}

// parse reads the probe's answer into Ansible's stat dictionary.
func parse(p, out string) (map[string]any, error) {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) > 0 && lines[0] == "absent" {
		return map[string]any{"exists": false}, nil
	}
	if len(lines) < 4 {
		return nil, fmt.Errorf("stat %s: unexpected answer %q", p, out)
	}
	f := strings.Fields(lines[0])
	if len(f) < 14 {
		return nil, fmt.Errorf("stat %s: unexpected stat line %q", p, lines[0])
	}
	raw, err := strconv.ParseUint(f[0], 16, 32)
	if err != nil {
		return nil, fmt.Errorf("stat %s: mode %q: %w", p, f[0], err)
	}
	num, flt := Int, Float
	mode := uint32(raw)
	kind := mode & 0o170000
	st := map[string]any{
		"exists": true, "path": p, "mode": fmt.Sprintf("%04o", mode&0o7777),
		"isdir": kind == 0o040000, "ischr": kind == 0o020000, "isblk": kind == 0o060000, "isreg": kind == 0o100000,
		"isfifo": kind == 0o010000, "islnk": kind == 0o120000, "issock": kind == 0o140000,
		"uid": num(f[1]), "gid": num(f[2]), "size": num(f[3]), "inode": num(f[4]), "dev": num(f[5]), "nlink": num(f[6]),
		"atime": flt(f[7]), "mtime": flt(f[8]), "ctime": flt(f[9]), "blocks": num(f[10]), "block_size": num(f[11]),
		"pw_name": f[12], "gr_name": strings.Join(f[13:], " "),
	}
	SetBits(st, mode)
	acc := strings.Fields(lines[1])
	if len(acc) == 3 {
		st["readable"], st["writeable"], st["executable"] = acc[0] == "1", acc[1] == "1", acc[2] == "1"
	}
	if st["islnk"] == true {
		st["lnk_target"], st["lnk_source"] = lines[2], lines[3]
	}
	if len(lines) > 4 && lines[4] != "" {
		st["checksum"] = lines[4]
	}
	return st, nil
}

// Int is a decimal number of a probe's answer as Ansible's stat gives
// it (an int), or the text itself when it is not one.
func Int(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return int(n)
	}
	return s
}

// Float is a time of a probe's answer as Ansible's stat gives it (a
// float), or the text itself when it is not one.
func Float(s string) any {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v
	}
	return s
}

// SetBits sets Ansible's permission flags (wusr, ..., isgid) of mode, as
// stat and find return them.
func SetBits(st map[string]any, mode uint32) {
	bits := []struct {
		name string
		bit  uint32
	}{{"wusr", 0o200}, {"rusr", 0o400}, {"xusr", 0o100}, {"wgrp", 0o020}, {"rgrp", 0o040}, {"xgrp", 0o010},
		{"woth", 0o002}, {"roth", 0o004}, {"xoth", 0o001}, {"isuid", 0o4000}, {"isgid", 0o2000}}
	for _, b := range bits {
		st[b.name] = mode&b.bit != 0
	}
}

// planned is the stat of a path as an earlier task plans it: a written
// file is a regular file with the planned content, mode and owner (what
// the plan leaves unsaid, as the live file has it).
func (a *Args) planned(live map[string]any, f *transport.FileInfo) map[string]any {
	if !f.Exists {
		return map[string]any{"exists": false}
	}
	st := map[string]any{}
	if live["exists"] == true {
		for k, v := range live {
			st[k] = v
		}
	} else {
		st = map[string]any{"exists": true, "path": a.Path, "uid": 0, "gid": 0, "pw_name": "root", "gr_name": "root", "nlink": 1,
			"readable": true, "writeable": true}
	}
	mode := uint32(f.Mode & 0o7777)
	if f.Mode == 0 {
		mode = 0o644
		if m, ok := live["mode"].(string); ok && live["isreg"] == true {
			if v, err := strconv.ParseUint(m, 8, 32); err == nil {
				mode = uint32(v)
			}
		}
	}
	st["mode"] = fmt.Sprintf("%04o", mode)
	SetBits(st, mode)
	st["isdir"], st["isreg"], st["islnk"], st["ischr"], st["isblk"], st["isfifo"], st["issock"] = false, true, false, false, false, false, false
	delete(st, "lnk_target")
	delete(st, "lnk_source")
	st["size"] = len(f.Content)
	if f.Owner != "" && f.Owner != st["pw_name"] {
		st["pw_name"] = f.Owner
	}
	if f.Group != "" && f.Group != st["gr_name"] {
		st["gr_name"] = f.Group
	}
	st["executable"] = mode&0o111 != 0
	if a.GetChecksum {
		h := algorithms[a.ChecksumAlgorithm]()
		h.Write(f.Content)
		st["checksum"] = hex.EncodeToString(h.Sum(nil))
	} else {
		delete(st, "checksum")
	}
	return st
}
