package cri

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeconverge/engine/transport"
)

// WorkloadLogDir is where a workload's container log goes on the node; the
// proof reads it and removes it in one round trip.
const WorkloadLogDir = "/var/lib/nodeconverge/proof"

// GPUGlob is the device a node with an NVIDIA GPU has.
const GPUGlob = "/dev/nvidia[0-9]*"

// Check validates w as the restart handler's arguments are validated.
func (w *Workload) Check() error {
	if w.Runtime == "" || w.Image == "" || len(w.Command) == 0 {
		return fmt.Errorf("workload needs runtime, image and command")
	}
	if w.Expect != "" {
		if _, err := regexp.Compile(w.Expect); err != nil {
			return fmt.Errorf("workload expect: %w", err)
		}
	}
	if _, err := w.timeout(); err != nil {
		return err
	}
	return nil
}

func (w *Workload) timeout() (time.Duration, error) {
	if w.Timeout == "" {
		return 60 * time.Second, nil
	}
	d, err := time.ParseDuration(w.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("workload timeout %q is not a positive duration such as 60s", w.Timeout)
	}
	return d, nil
}

func (w *Workload) needsGPU() bool { return w.NeedsGPU == nil || *w.NeedsGPU }

// workload runs the workload's container through its handler, inside a
// sandbox of that handler, and judges its exit status and output.
func (c *client) workload(ctx context.Context, p transport.Prover, o Options, systemd bool) *WorkloadResult {
	w := o.Workload
	res := &WorkloadResult{Runtime: w.Runtime, Status: Failed}
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()
	if w.needsGPU() {
		snap, err := p.Query(ctx, transport.Query{Globs: []string{GPUGlob}})
		if err != nil {
			res.Status, res.Reason = Unproven, "look for a GPU device: "+err.Error()
			return res
		}
		if len(snap.Globs[GPUGlob]) == 0 {
			res.Status, res.Reason = Skipped, "this node has no NVIDIA GPU ("+GPUGlob+" absent); set needs_gpu: false to run the workload anyway"
			return res
		}
	}
	timeout, _ := w.timeout() // Check validated it
	st, err := c.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: w.Image}})
	if err != nil {
		res.Reason = fmt.Sprintf("CRI ImageStatus %s: %s", w.Image, message(err))
		return res
	}
	if st.GetImage() == nil {
		res.Reason = fmt.Sprintf("workload image %s is not on the node; the proof never pulls it: pull or import it first", w.Image)
		return res
	}
	uid := o.RunID + "-workload"
	logDir := path.Join(WorkloadLogDir, uid)
	cfg := sandboxConfig(o, "proof-workload", w.Runtime, systemd)
	cfg.Metadata.Uid = uid
	cfg.LogDirectory = logDir
	sb, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: w.Runtime})
	if err != nil {
		res.Reason = "RunPodSandbox: " + message(err)
		return res
	}
	defer func() {
		if err := c.remove(ctx, sb.GetPodSandboxId()); err != nil && res.Status == Proved {
			res.Status, res.Reason = Failed, "the workload ran but its sandbox could not be removed: "+err.Error()
		}
	}()
	var envs []*runtimeapi.KeyValue
	keys := make([]string, 0, len(w.Env))
	for k := range w.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(w.Env[k])})
	}
	cc, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.GetPodSandboxId(), SandboxConfig: cfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "workload"},
			Image:    &runtimeapi.ImageSpec{Image: w.Image},
			Command:  w.Command,
			Envs:     envs,
			Labels:   cfg.Labels,
			LogPath:  "workload.log",
		}})
	if err != nil {
		res.Reason = "CreateContainer: " + message(err)
		return res
	}
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cc.GetContainerId()}); err != nil {
		res.Reason = "StartContainer: " + message(err)
		c.readLog(ctx, p, logDir, res)
		return res
	}
	exit, err := c.waitExit(ctx, cc.GetContainerId(), timeout)
	c.readLog(ctx, p, logDir, res)
	switch {
	case err != nil:
		res.Reason = err.Error()
	case exit != 0:
		res.Reason = fmt.Sprintf("the workload exited %d", exit)
	case w.Expect != "" && !regexp.MustCompile(w.Expect).MatchString(res.Output):
		res.Reason = fmt.Sprintf("the workload's output does not match %q", w.Expect)
	default:
		res.Status = Proved
	}
	return res
}

// waitExit polls the container until it exits: CRI's event stream is not
// served by containerd 1.6, and the status is one cheap call.
func (c *client) waitExit(ctx context.Context, id string, timeout time.Duration) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			return 0, fmt.Errorf("ContainerStatus: %s", message(err))
		}
		if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st.GetStatus().GetExitCode(), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the workload did not exit within %s", timeout)
		case <-tick.C:
		}
	}
}

// readLog reads the container's CRI log (lines "TIME STREAM TAG TEXT")
// into res.Output and removes the log directory, in one round trip.
func (c *client) readLog(ctx context.Context, p transport.Prover, dir string, res *WorkloadResult) {
	out, err := p.Exec(ctx, transport.Cmd{Argv: []string{"sh", "-c", `cat -- "$1/workload.log" 2>/dev/null; rm -rf -- "$1"; rmdir -- "${1%/*}" 2>/dev/null; :`, "readlog", dir}, Touches: []string{}})
	if err != nil {
		res.Output = "(log not read: " + err.Error() + ")"
		return
	}
	var lines []string
	var partial strings.Builder
	for _, line := range strings.Split(string(out.Stdout), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) < 3 {
			continue
		}
		text := ""
		if len(f) == 4 {
			text = f[3]
		}
		partial.WriteString(text)
		if f[2] != "P" {
			lines = append(lines, partial.String())
			partial.Reset()
		}
	}
	res.Output = strings.Join(lines, "\n")
}
