package cri

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"nodeconverge/engine/transport"
)

// crictlScript is the whole fallback proof, run with the node's crictl in
// one round trip.
//
//go:embed crictl.sh
var crictlScript string

// proveCrictl is the proof with the node's crictl, for a connection that
// could not open the socket (why says why; it stays in the report).
func proveCrictl(ctx context.Context, p transport.Prover, o Options, why string) *Report {
	r := &Report{Via: ViaCrictl}
	secs := int(math.Ceil(o.Timeout.Seconds()))
	age := secs
	if o.SweepAll {
		age = 0
	}
	settle := 0
	if o.Settle > 0 {
		from := o.SettleFrom
		if from.IsZero() {
			from = time.Now()
		}
		settle = int(math.Ceil(time.Until(from.Add(o.Settle)).Seconds()))
		if settle < 1 {
			settle = 1
		}
	}
	image := o.SandboxImage
	pull := "0"
	if o.AllowPull {
		pull = "1"
	}
	// The daemon's own view decides the handlers, but the script needs
	// their configs up front: the expected ones and the default runtime as
	// the config dump names it.
	names := expected(o.Runtimes, o.DefaultRuntime)
	argv := []string{"sh", "-c", crictlScript, "crictl-proof", o.Crictl, o.Socket, strconv.Itoa(secs), o.RunID, image, pull, strconv.Itoa(age), strconv.Itoa(settle)}
	if o.StatusOnly || image == "" {
		names = nil
	}
	for _, n := range names {
		// The script picks one by the handler's SystemdCgroup as the
		// daemon reports it.
		argv = append(argv, n)
		for _, systemd := range []bool{false, true} {
			cfg, err := json.Marshal(sandboxConfig(o, "proof-"+n, n, systemd))
			if err != nil {
				r.Unproven = fmt.Sprintf("%s; crictl fallback: encode the sandbox config: %v", why, err)
				return r
			}
			argv = append(argv, string(cfg))
		}
	}
	res, err := p.Exec(ctx, transport.Cmd{Argv: argv, Touches: []string{}})
	if err != nil {
		r.Via = ""
		r.Unproven = fmt.Sprintf("%s; crictl fallback: %v", why, err)
		return r
	}
	recs := records(string(res.Stdout))
	if len(recs) > 0 && recs[0].key == "nocrictl" {
		r.Via = ""
		r.Unproven = fmt.Sprintf("%s; and %s is not on the node's PATH for the crictl fallback", why, o.Crictl)
		return r
	}
	var cur *Handler
	for _, rc := range recs {
		switch rc.key {
		case "version":
			if rc.rc() == 0 {
				r.Version = versionOf(rc.text)
			}
		case "info":
			if rc.rc() != 0 {
				r.Failure = fmt.Sprintf("crictl info on %s failed: %s", o.Socket, crictlError(rc.text))
				if strings.Contains(rc.text, "Unimplemented") || strings.Contains(rc.text, "unknown service") {
					r.Failure = fmt.Sprintf("containerd on %s does not serve the CRI API (crictl info: %s): its CRI plugin is disabled (disabled_plugins) or did not load; the kubelet cannot use this node", o.Socket, crictlError(rc.text))
				}
				break
			}
			r.fromInfo(rc.text)
			want := o.Runtimes
			if o.AllLoaded {
				want = append(append([]string(nil), want...), r.Loaded...)
			}
			r.handlers(want)
			if r.SandboxImage == "" {
				r.SandboxImage = image
			}
			if r.Failure == "" {
				r.Failure = notReady(r.Conditions)
			}
		case "swept":
			r.Swept = append(r.Swept, rc.arg)
		case "noimage":
			r.Failure = MissingImage(image)
		case "pull":
			if rc.rc() != 0 {
				r.Failure = fmt.Sprintf("sandbox image %s is not on the node and pulling it failed (allow_pull is set): %s", image, crictlError(rc.text))
			}
		case "handler":
			code, name, _ := strings.Cut(rc.arg, " ")
			cur = r.Handler(name)
			if cur == nil || cur.Status != Unproven {
				// A handler the status did not list already failed.
				cur = nil
				break
			}
			if code != "0" {
				cur.Status, cur.Reason = Failed, "crictl runp: "+crictlError(rc.text)
				break
			}
			lines := strings.Split(strings.TrimSpace(rc.text), "\n")
			cur.Sandbox = lines[len(lines)-1]
		case "state":
			if cur == nil {
				break
			}
			if rc.arg == "SANDBOX_READY" {
				cur.Status = Proved
			} else {
				cur.Status, cur.Reason = Failed, fmt.Sprintf("the sandbox started but is %q, not READY", rc.arg)
			}
		case "removed":
			if cur != nil && rc.rc() != 0 && cur.Status == Proved {
				cur.Status, cur.Reason = Failed, "the sandbox was READY but could not be removed: "+crictlError(rc.text)
			}
		case "ms":
			if cur != nil {
				if ms, err := strconv.Atoi(rc.arg); err == nil {
					cur.Elapsed = time.Duration(ms) * time.Millisecond
				}
			}
		case "settle":
			f := strings.Fields(rc.arg)
			if len(f) == 4 {
				if s, err := strconv.Atoi(f[3]); err == nil {
					r.Settled = time.Duration(s) * time.Second
				}
				switch {
				case f[1] != f[2]:
					r.Failure = fmt.Sprintf("containerd did not stay up across the %s settle window: its socket %s was made anew (the daemon died or restarted after it answered)", o.Settle, o.Socket)
				case f[0] != "0":
					r.Failure = fmt.Sprintf("containerd stopped answering within the %s settle window", o.Settle)
				}
			}
		}
	}
	if r.Failure != "" {
		for _, h := range r.Handlers {
			if h.Status == Proved {
				h.Status, h.Reason = Failed, "proved, then "+r.Failure
			}
		}
		failAll(r, r.Failure)
	}
	if len(recs) == 0 || recs[len(recs)-1].key != "end" && r.Failure == "" {
		r.Unproven = fmt.Sprintf("%s; the crictl fallback ended early (exit %d): %s", why, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if o.Workload != nil && !o.StatusOnly {
		r.Workload = &WorkloadResult{Runtime: o.Workload.Runtime, Status: Unproven, Reason: "the workload proof needs the CRI socket; the crictl fallback proves sandboxes only"}
	}
	if o.StatusOnly {
		for _, h := range r.Handlers {
			if h.Status == Unproven {
				h.Status, h.Reason = Skipped, "no sandbox started (status only; --prove starts one)"
			}
		}
	}
	for _, h := range r.Handlers {
		if h.Status == Unproven && h.Reason == "" {
			h.Reason = "the crictl fallback started no sandbox for it (it starts one for the play's runtimes and the default)"
		}
	}
	// The reason the socket could not be used stays visible.
	r.Via = ViaCrictl + " (" + why + ")"
	return r
}

// record is one "@KEY ARG" line of the script and the "| " lines after it.
type record struct {
	key, arg, text string
}

func (r record) rc() int {
	f := strings.Fields(r.arg)
	if len(f) == 0 {
		return -1
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return -1
	}
	return n
}

func records(out string) []record {
	var recs []record
	var text []string
	flush := func() {
		if len(recs) > 0 {
			recs[len(recs)-1].text = strings.Join(text, "\n")
		}
		text = nil
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "@"):
			flush()
			k, a, _ := strings.Cut(line[1:], " ")
			recs = append(recs, record{key: k, arg: a})
		case strings.HasPrefix(line, "| "):
			text = append(text, line[2:])
		case line == "|":
			text = append(text, "")
		}
	}
	flush()
	return recs
}

// crictlError picks crictl's error out of its output: the msg of its
// fatal log line, without the warnings crictl prints about its own config.
func crictlError(out string) string {
	var msgs []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "level=warning") || strings.TrimSpace(line) == "" {
			continue
		}
		if i := strings.Index(line, `msg="`); i >= 0 {
			m := line[i+5:]
			if j := strings.LastIndex(m, `"`); j >= 0 {
				m = m[:j]
			}
			if u, err := strconv.Unquote(`"` + m + `"`); err == nil {
				m = u
			}
			msgs = append(msgs, m)
			continue
		}
		msgs = append(msgs, strings.TrimSpace(line))
	}
	return strings.Join(msgs, "; ")
}

// versionOf reads crictl version's RuntimeName and RuntimeVersion.
func versionOf(out string) string {
	var name, ver string
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "RuntimeName":
			name = strings.TrimSpace(v)
		case "RuntimeVersion":
			ver = strings.TrimSpace(v)
		}
	}
	return strings.TrimSpace(name + " " + ver)
}

// fromInfo fills r from `crictl info`: the status's conditions and the
// daemon's config, as crictl decodes the verbose status.
func (r *Report) fromInfo(out string) {
	var info struct {
		Status struct {
			Conditions []Condition `json:"conditions"`
		} `json:"status"`
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		r.Failure = fmt.Sprintf("read crictl info: %v", err)
		return
	}
	r.Conditions = info.Status.Conditions
	if len(info.Config) == 0 {
		r.Failure = "crictl info has no config: cannot tell which runtime handlers the daemon loaded"
		return
	}
	if err := r.applyConfig(info.Config); err != nil {
		r.Failure = err.Error()
	}
}
