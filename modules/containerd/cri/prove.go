package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeconverge/engine/transport"
)

// DefaultTimeout bounds a proof when Options.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// CleanupGrace bounds the removal of a proof's own sandboxes once its
// deadline has passed (a runtime that hangs, the task's timeout) or its
// run was interrupted: the stream to the daemon usually still works then,
// and a sandbox not removed now stays until the next proof's sweep.
const CleanupGrace = 15 * time.Second

// cleanupCtx is ctx while it is live with at least CleanupGrace left,
// else a fresh context bounded by CleanupGrace that keeps ctx's values: a
// removal that starts just before the deadline gets its time too (2.x
// fails a Stop whose kill hangs just before a 15s deadline, and a second
// Stop with two seconds left runs out).
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ctx.Err() == nil && (!ok || time.Until(dl) >= CleanupGrace) {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupGrace)
}

// Prove proves the node's running containerd (see the package comment):
// over its socket, else with crictl, else unproven. It never returns a
// report that says proved for something it did not see.
func Prove(ctx context.Context, p transport.Prover, o Options) *Report {
	start := time.Now()
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	r, reached := proveSocket(ctx, p, o)
	if !reached {
		why := r.Unproven
		switch {
		case o.Crictl == "":
			r.Unproven = why + "; no crictl fallback is configured"
		default:
			r = proveCrictl(ctx, p, o, why)
		}
	}
	if r.Unproven != "" {
		for _, h := range r.Handlers {
			if h.Status == Unproven && h.Reason == "" {
				h.Reason = r.Unproven
			}
		}
	}
	r.Elapsed = time.Since(start)
	return r
}

// dialer opens the daemon's socket through the host's connection and
// counts how often: a second dial means the first stream ended, and the
// daemon that answers is not (or may not be) the one first asked.
type dialer struct {
	p      transport.Prover
	socket string
	dials  atomic.Int32
	ok     atomic.Int32
	mu     sync.Mutex
	err    error
}

func (d *dialer) dial(ctx context.Context, _ string) (net.Conn, error) {
	d.dials.Add(1)
	c, err := d.p.DialSocket(ctx, d.socket)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.err = err
		return nil, err
	}
	d.ok.Add(1)
	return c, nil
}

func (d *dialer) lastErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// client is one gRPC connection to the daemon's CRI services.
type client struct {
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
	img  runtimeapi.ImageServiceClient
	d    *dialer
}

func newClient(p transport.Prover, socket string) (*client, error) {
	d := &dialer{p: p, socket: socket}
	// passthrough: the target is not resolved; every connection is
	// the dialer's stream to the node's socket.
	conn, err := grpc.NewClient("passthrough:///containerd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(d.dial),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("CRI client for %s: %w", socket, err)
	}
	return &client{conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn), d: d}, nil
}

// message is the daemon's own text of a gRPC error.
func message(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// proveSocket is the proof over the socket; reached false means the socket
// could not be opened at all (r.Unproven says why) and crictl may try.
func proveSocket(ctx context.Context, p transport.Prover, o Options) (*Report, bool) {
	r := &Report{}
	c, err := newClient(p, o.Socket)
	if err != nil {
		r.Unproven = err.Error()
		return r, false
	}
	defer c.conn.Close()
	v, err := c.version(ctx)
	if err != nil {
		if c.d.ok.Load() == 0 {
			// The stream never opened: nothing of the daemon was seen.
			why := message(err)
			if de := c.d.lastErr(); de != nil {
				why = de.Error()
			}
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				why = fmt.Sprintf("opening %s timed out: %s", o.Socket, why)
			}
			r.Unproven = fmt.Sprintf("cannot reach containerd's CRI socket %s through the connection: %s", o.Socket, why)
			return r, false
		}
		r.Via = ViaSocket
		r.Failure = daemonError(o.Socket, "Version", err)
		r.handlers(o.Runtimes)
		failAll(r, r.Failure)
		return r, true
	}
	r.Via = ViaSocket
	r.Version = strings.TrimSpace(v.GetRuntimeName() + " " + v.GetRuntimeVersion())
	st, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		r.Failure = daemonError(o.Socket, "Status", err)
		r.handlers(o.Runtimes)
		failAll(r, r.Failure)
		return r, true
	}
	for _, cd := range st.GetStatus().GetConditions() {
		r.Conditions = append(r.Conditions, Condition{Type: cd.GetType(), Status: cd.GetStatus(), Reason: cd.GetReason(), Message: cd.GetMessage()})
	}
	r.SandboxImage = o.SandboxImage
	if raw, ok := st.GetInfo()["config"]; ok {
		if err := r.applyConfig([]byte(raw)); err != nil {
			r.Failure = err.Error()
		}
	} else {
		r.Failure = "the daemon's verbose CRI status has no config entry: cannot tell which runtime handlers it loaded"
	}
	for _, h := range st.GetRuntimeHandlers() {
		// 2.x lists its handlers here as well; one the config does
		// not carry is still loaded.
		if h.GetName() != "" && r.config != nil && r.config[h.GetName()] == nil {
			r.config[h.GetName()] = &Handler{Name: h.GetName(), Loaded: true}
			r.Loaded = append(r.Loaded, h.GetName())
		}
	}
	if r.Failure == "" {
		r.Failure = notReady(r.Conditions)
	}
	if o.AllLoaded {
		o.Runtimes = append(append([]string(nil), o.Runtimes...), r.Loaded...)
	}
	r.handlers(o.Runtimes)
	if r.Failure != "" {
		failAll(r, r.Failure)
		return r, true
	}
	if o.StatusOnly {
		for _, h := range r.Handlers {
			if h.Status == Unproven {
				h.Status, h.Reason = Skipped, "no sandbox started (status only; --prove starts one)"
			}
		}
		return r, true
	}
	c.sweep(ctx, r, o)
	if msg := c.sandboxImage(ctx, r, o); msg != "" {
		r.Failure = msg
		failAll(r, msg)
		c.cleanup(ctx, o)
		return r, true
	}
	var wg sync.WaitGroup
	for _, h := range r.Handlers {
		if h.Status != Unproven {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.sandbox(ctx, h, o)
		}()
	}
	wg.Wait()
	if o.Workload != nil {
		systemd := false
		if h := r.config[o.Workload.Runtime]; h != nil {
			systemd = systemdCgroup(h.Options)
		}
		r.Workload = c.workload(ctx, p, o, systemd)
	}
	c.cleanup(ctx, o)
	c.settle(ctx, r, o)
	return r, true
}

// notInitialized is containerd's answer while its CRI service is still
// starting: its plugin reports ok before the service has loaded its state,
// so a gate right after a restart can ask too early.
const notInitialized = "server is not initialized yet"

// version asks the daemon's version, waiting (within ctx) while the CRI
// service says it is still starting.
func (c *client) version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
		if err == nil || !strings.Contains(message(err), notInitialized) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-tick.C:
		}
	}
}

// daemonError words a failed call that the daemon (not the stream)
// answered.
func daemonError(socket, call string, err error) string {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Sprintf("containerd on %s does not serve the CRI API (%s: %s): its CRI plugin is disabled (disabled_plugins) or did not load; the kubelet cannot use this node", socket, call, message(err))
	}
	return fmt.Sprintf("CRI %s on %s failed: %s", call, socket, message(err))
}

// notReady is the failure for a daemon whose RuntimeReady condition is
// not true. NetworkReady is reported, not judged: host-network pods (and
// this proof) do not need a CNI network, and a node without its CNI
// configured yet is not a broken runtime.
func notReady(conds []Condition) string {
	for _, c := range conds {
		if c.Type == runtimeapi.RuntimeReady && !c.Status {
			return fmt.Sprintf("the CRI status says RuntimeReady is false: %s %s", c.Reason, c.Message)
		}
	}
	for _, c := range conds {
		if c.Type == runtimeapi.RuntimeReady {
			return ""
		}
	}
	return "the CRI status has no RuntimeReady condition"
}

// failAll marks every handler not decided yet as failed with why.
func failAll(r *Report, why string) {
	for _, h := range r.Handlers {
		if h.Status == Unproven {
			h.Status, h.Reason = Failed, why
		}
	}
}

// sandboxConfig is a pod sandbox as the kubelet asks for a host-network
// pod, labelled so any proof can find it again. systemd says the handler
// drives cgroups through systemd (its SystemdCgroup option), which decides
// the form of the cgroup parent, as the kubelet's cgroup driver does.
func sandboxConfig(o Options, name, handler string, systemd bool) *runtimeapi.PodSandboxConfig {
	uid := o.RunID + "-" + handler
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Uid: uid, Namespace: Namespace, Attempt: o.Attempt},
		Labels:   map[string]string{LabelProof: "true", LabelRun: o.RunID, LabelHandler: handler},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent(systemd),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
			},
		},
	}
}

// sandbox proves one handler: a host-network sandbox through it reaches
// READY and is stopped and removed.
func (c *client) sandbox(ctx context.Context, h *Handler, o Options) {
	start := time.Now()
	defer func() { h.Elapsed = time.Since(start) }()
	resp, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(o, "proof-"+h.Name, h.Name, systemdCgroup(h.Options)), RuntimeHandler: h.Name})
	if err != nil {
		h.Status, h.Reason = Failed, "RunPodSandbox: "+message(err)
		return
	}
	h.Sandbox = resp.GetPodSandboxId()
	st, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: h.Sandbox})
	switch {
	case err != nil:
		h.Status, h.Reason = Failed, "PodSandboxStatus: "+message(err)
	case st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY:
		h.Status, h.Reason = Failed, fmt.Sprintf("the sandbox started but is %s, not READY", st.GetStatus().GetState())
	default:
		h.Status = Proved
	}
	rctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if err := c.remove(rctx, h.Sandbox); err != nil && h.Status == Proved {
		h.Status, h.Reason = Failed, "the sandbox was READY but could not be removed: "+err.Error()
	}
}

func (c *client) remove(ctx context.Context, id string) error {
	if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("StopPodSandbox %s: %s", id, message(err))
	}
	if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("RemovePodSandbox %s: %s", id, message(err))
	}
	return nil
}

// sweep removes the sandboxes earlier proofs left (a run killed with
// SIGKILL or past its deadline mid-proof). Without SweepAll only those
// older than a proof can take are removed: a concurrent check-mode proof
// on the same node (it takes no node lock) may still be using a younger
// one.
func (c *client) sweep(ctx context.Context, r *Report, o Options) {
	resp, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelProof: "true"}}})
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-o.Timeout).UnixNano()
	for _, sb := range resp.GetItems() {
		if sb.GetLabels()[LabelRun] == o.RunID {
			continue
		}
		if !o.SweepAll && sb.GetCreatedAt() > cutoff {
			continue
		}
		if err := c.remove(ctx, sb.GetId()); err == nil {
			r.Swept = append(r.Swept, sb.GetId())
		}
	}
}

// cleanup removes whatever this proof's sandboxes left: a failed
// RunPodSandbox can leave a NOTREADY sandbox behind in some versions, and
// a sandbox whose stop ran out of time is still there. It tries again
// while its context lasts: containerd 2.x fails a Stop at once (its own
// short deadline) while an earlier kill of the same sandbox still runs.
// What it cannot remove the next proof's sweep does.
func (c *client) cleanup(ctx context.Context, o Options) {
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelRun: o.RunID}}})
		if err != nil {
			return
		}
		left := 0
		for _, sb := range resp.GetItems() {
			if c.remove(ctx, sb.GetId()) != nil {
				left++
			}
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sandboxImage checks that the sandbox image is on the node: a sandbox
// start would otherwise pull it, and a pull behind a broken registry
// config hides the cause. With AllowPull it is pulled instead.
func (c *client) sandboxImage(ctx context.Context, r *Report, o Options) string {
	if r.SandboxImage == "" {
		return "cannot tell which sandbox image containerd uses (its status does not say and no config dump gave it); starting a sandbox could pull an image, so nothing is started"
	}
	st, err := c.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: r.SandboxImage}})
	if err != nil {
		return fmt.Sprintf("CRI ImageStatus %s: %s", r.SandboxImage, message(err))
	}
	if st.GetImage() != nil {
		return ""
	}
	if !o.AllowPull {
		return MissingImage(r.SandboxImage)
	}
	if _, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: r.SandboxImage}}); err != nil {
		return fmt.Sprintf("sandbox image %s is not on the node and pulling it failed (allow_pull is set): %s", r.SandboxImage, message(err))
	}
	return ""
}

// MissingImage is the failure for a sandbox image that is not on the node.
func MissingImage(image string) string {
	return fmt.Sprintf("sandbox image %s is not on the node: no pod can start here until it is; pull it (crictl pull %s, or ctr -n k8s.io images pull %s) or import it (ctr -n k8s.io images import FILE), or set allow_pull: true on the restart handler to let the proof pull it (a proof never pulls by itself: a pull behind a broken registry config would hide the cause)",
		image, image, image)
}

// settle watches the daemon across the settle window: the stream the proof
// opened must still be the only one (a daemon that died or restarted ends
// it, and the next call dials again) and the daemon must still answer.
func (c *client) settle(ctx context.Context, r *Report, o Options) {
	if o.Settle <= 0 {
		return
	}
	from := o.SettleFrom
	if from.IsZero() {
		from = time.Now()
	}
	if ctx.Err() != nil {
		// The proof's deadline passed before the window (a runtime that
		// hung holds its sandbox start): the daemon was not watched, so
		// nothing is said of it. A handler that did not finish has
		// failed naming the deadline already; one that proved still
		// lacks the window.
		for _, h := range r.Handlers {
			if h.Status == Proved {
				h.Status, h.Reason = Failed, fmt.Sprintf("proved, but the proof's deadline passed before the %s settle window could be watched", o.Settle)
			}
		}
		return
	}
	end := from.Add(o.Settle)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end.Add(time.Second)) {
		end = dl.Add(-time.Second)
	}
	if wait := time.Until(end); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	r.Settled = time.Since(from)
	_, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{})
	switch {
	case c.d.dials.Load() > 1:
		r.Failure = fmt.Sprintf("containerd did not stay up across the %s settle window: its CRI socket stream ended and had to be opened again (the daemon died or restarted after it answered)", o.Settle)
	case err != nil:
		r.Failure = fmt.Sprintf("containerd stopped answering within the %s settle window: %s", o.Settle, message(err))
	}
	if r.Failure != "" {
		for _, h := range r.Handlers {
			if h.Status == Proved {
				h.Status, h.Reason = Failed, "proved, then "+r.Failure
			}
		}
	}
}

// The proof's cgroup parents, in the two forms a kubelet sends one: a
// systemd slice for a handler with SystemdCgroup, else a cgroupfs path.
// Without one containerd falls back to /<namespace>/<id>, which runc
// refuses under SystemdCgroup ("expected cgroupsPath to be of format
// slice:prefix:name"), so a proof without it failed handlers a kubelet's
// pods run on. They are outside the kubelet's kubepods tree on purpose:
// its orphan cleanup kills what runs in a pod cgroup it does not know,
// which a proof's sandbox on a live node would be.
const (
	CgroupParentSystemd  = "nodeconverge-proof.slice"
	CgroupParentCgroupfs = "/nodeconverge-proof"
)

// cgroupParent is the sandbox's cgroup parent for a handler that drives
// cgroups through systemd or not.
func cgroupParent(systemd bool) string {
	if systemd {
		return CgroupParentSystemd
	}
	return CgroupParentCgroupfs
}

// systemdCgroup says whether a handler's options, as the daemon reports
// them, have it drive cgroups through systemd (runc's SystemdCgroup, or
// systemd_cgroup as some shims spell it).
func systemdCgroup(opts map[string]any) bool {
	for k, v := range opts {
		if strings.EqualFold(k, "SystemdCgroup") || strings.EqualFold(k, "systemd_cgroup") {
			switch x := v.(type) {
			case bool:
				return x
			case string:
				return strings.EqualFold(x, "true")
			}
		}
	}
	return false
}
