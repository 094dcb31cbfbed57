// Package browser drives Debian's headless Chromium (/usr/bin/chromium,
// installed by lab/deps.sh) over the DevTools protocol (chromedp), for the
// tests and the bench that open nodeconverge's HTML report as a person
// would. Chromium starts with the flags this machine needs: no sandbox (we
// run as root), no GPU, and no background networking, component updates or
// sync (the machine has no network; without them Chromium keeps trying),
// with a fresh profile in a temporary directory every time.
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/chromedp/chromedp"
)

// Path is where Debian's chromium package puts the browser.
const Path = "/usr/bin/chromium"

// StartLimit bounds the browser's start on a loaded machine.
const StartLimit = time.Minute

// Browser is one headless Chromium with one tab.
type Browser struct {
	// Ctx runs actions in the tab (chromedp.Run(b.Ctx, ...)).
	Ctx     context.Context
	cancels []context.CancelFunc
	profile string
}

// Start launches Chromium; the caller must Close it. A missing browser is an
// error naming what installs it.
func Start(ctx context.Context) (*Browser, error) {
	if _, err := exec.LookPath(Path); err != nil {
		return nil, fmt.Errorf("headless chromium: %s missing (lab/deps.sh installs Debian's chromium): %w", Path, err)
	}
	profile, err := os.MkdirTemp("", "nc-chromium-")
	if err != nil {
		return nil, fmt.Errorf("chromium profile: %w", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Path),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1600, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	tctx, tcancel := chromedp.NewContext(actx)
	b := &Browser{Ctx: tctx, cancels: []context.CancelFunc{tcancel, acancel}, profile: profile}
	// The first Do starts the browser, which lives as long as the context
	// of that call: it gets the tab's own, and a browser that does not
	// start within a minute is ended, so a caller never hangs on it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(tctx) }()
	timer := time.NewTimer(StartLimit)
	defer timer.Stop()
	select {
	case err := <-started:
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("start chromium: %w", err)
		}
		return b, nil
	case <-timer.C:
		b.Close()
		return nil, fmt.Errorf("start chromium: no answer within %s", StartLimit)
	}
}

// Close ends the browser and removes its profile.
func (b *Browser) Close() error {
	for _, c := range b.cancels {
		c()
	}
	if err := os.RemoveAll(b.profile); err != nil {
		return fmt.Errorf("remove chromium profile: %w", err)
	}
	return nil
}

// Do runs actions in the tab, bounded together by limit.
func (b *Browser) Do(limit time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.Ctx, limit)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Eval evaluates a JavaScript expression in the tab and decodes its value
// into T, bounded by limit.
func Eval[T any](b *Browser, limit time.Duration, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, limit)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// Screenshot is a PNG of what the window shows.
func (b *Browser) Screenshot(limit time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, limit)
	defer cancel()
	return chromedp.Run(ctx, chromedp.CaptureScreenshot())
}
