package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/toolhost/toolhost/netpolicy"
	"github.com/toolhost/toolhost/sdk"
)

// notFound is the message of every call when there is no Chromium to run.
const notFound = "Chromium was not found: install it (Debian: apt-get install chromium) or set chromium_path in the plugin's config"

// candidates are the executables looked up on PATH when chromium_path is not set.
var candidates = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// settings is the plugin block's config {}.
type settings struct {
	// Config is the network policy every request of the browser obeys:
	// allow_hosts, deny_hosts, allow_private, as in the network module.
	netpolicy.Config
	// ChromiumPath is the browser to run; absent means the first candidate
	// found on PATH.
	ChromiumPath string `json:"chromium_path"`
	// Headless runs the browser without a window; absent means true.
	Headless *bool `json:"headless"`
	// Viewport is the window's size in CSS pixels; absent means 1280x800.
	Viewport *viewport `json:"viewport"`
	// ScreenshotDir is where screenshots are saved: absolute, or relative to
	// the plugin's working directory (the workspace); absent means
	// "screenshots".
	ScreenshotDir string `json:"screenshot_dir"`
}

type viewport struct {
	Width  int64 `json:"width"`
	Height int64 `json:"height"`
}

// NavigateArgs are the arguments of navigate.
type NavigateArgs struct {
	URL string `json:"url" jsonschema:"the absolute http or https URL to load"`
}

// TextArgs are the arguments of get_text.
type TextArgs struct {
	Selector string `json:"selector,omitempty" jsonschema:"a CSS selector; the visible text of the first element it matches is returned (default body)"`
}

// pageInfo is what navigate reports.
type pageInfo struct {
	URL   string `json:"url" jsonschema:"the URL loaded, after redirects"`
	Title string `json:"title" jsonschema:"the page's title"`
}

// textScript evaluates to the innerText of the first element matching the
// selector given as a JSON string, or null.
const textScript = `(() => { const e = document.querySelector(%s); return e ? e.innerText : null })()`

// browser is one Chromium with one tab, which the calls take turns to use.
type browser struct {
	// lock is held by the call using the tab: a channel, so that waiting
	// for it honours the call's context.
	lock     chan struct{}
	execPath string // empty when Chromium was not found
	headless bool
	view     viewport
	shots    string                     // the screenshot directory
	dialer   *netpolicy.Dialer          // the policy, and how the proxy connects
	proxy    *netpolicy.Proxy           // every request of Chromium goes through it; runs with Chromium
	tab      context.Context            // the first tab, which owns the browser; nil until the first call starts Chromium
	tabs     map[string]context.Context // one tab per session, the first included
	stop     context.CancelFunc         // stops Chromium and its proxy, and removes its profile
}

func newBrowser() *browser {
	return &browser{lock: make(chan struct{}, 1), dialer: &netpolicy.Dialer{Policy: &netpolicy.Policy{}}}
}

func newGroup(b *browser) *sdk.Group {
	return &sdk.Group{
		ID:          "chrome",
		Description: "A headless Chromium: load web pages and read their text.",
		Version:     "0.1.0",
		OnConfigure: b.configure,
		Tools: []sdk.Tool{
			sdk.NewStructuredTool("navigate", "Load a page in the browser's tab; returns the final URL and the title as JSON.", b.navigate, sdk.Title("Open web page"), sdk.ReadOnly(), sdk.OpenWorld()),
			sdk.NewTool("get_text", "Return the visible text (innerText) of an element of the current page.", b.getText, sdk.Title("Get page text"), sdk.ReadOnly()),
			sdk.NewTool("get_html", "Return the HTML (outerHTML) of an element of the current page, or of the whole page.", b.getHTML, sdk.Title("Get page HTML"), sdk.ReadOnly()),
			sdk.NewTool("click", "Click the first element matching a CSS selector, once it is visible.", b.click, sdk.Title("Click element"), sdk.Destructive(), sdk.OpenWorld()),
			sdk.NewTool("type", "Type text into the first element matching a CSS selector (an input or textarea).", b.typeText, sdk.Title("Type into element"), sdk.Destructive(), sdk.OpenWorld()),
			sdk.NewTool("wait_visible", "Wait until an element matching a CSS selector is visible.", b.waitVisible, sdk.Title("Wait for element"), sdk.ReadOnly()),
			sdk.NewTool("evaluate", "Evaluate a JavaScript expression in the page and return its value as JSON.", b.evaluate, sdk.Title("Run JavaScript in page"), sdk.Destructive(), sdk.OpenWorld()),
			sdk.NewTool("screenshot", "Take a PNG screenshot of the viewport, the full page or one element; it is saved under the workspace and attached.", b.screenshot, sdk.Title("Take screenshot"), sdk.Additive()),
			sdk.NewTool("current_url", "Return the URL of the current page.", b.currentURL, sdk.Title("Get page URL"), sdk.ReadOnly()),
		},
	}
}

func (b *browser) configure(_ context.Context, req *sdk.ConfigureRequest) error {
	var s settings
	if err := sdk.DecodeConfig(req, &s); err != nil {
		return err
	}
	policy, err := netpolicy.Compile(s.Config)
	if err != nil {
		return sdk.Errorf(sdk.CodeValidation, "config: %v", err)
	}
	b.dialer = &netpolicy.Dialer{Policy: policy, Upstream: netpolicy.EnvUpstream()} // a sandbox's proxy, when it runs in one
	b.headless = s.Headless == nil || *s.Headless
	b.view = viewport{Width: 1280, Height: 800}
	if s.Viewport != nil {
		if s.Viewport.Width <= 0 || s.Viewport.Height <= 0 {
			return sdk.Errorf(sdk.CodeValidation, "config: viewport: width and height must be positive")
		}
		b.view = *s.Viewport
	}
	b.shots = cmp.Or(s.ScreenshotDir, "screenshots")
	path, err := findChromium(s.ChromiumPath)
	if err != nil { // the group still loads; its calls say what to install
		sdk.Logger().Warn(notFound, "error", err)
	}
	b.execPath = path
	return nil
}

// findChromium returns the configured browser if it is an executable, and
// otherwise the first candidate found on PATH.
func findChromium(configured string) (string, error) {
	if configured != "" {
		return exec.LookPath(configured)
	}
	for _, name := range candidates {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("none of %v is on PATH", candidates)
}

// use runs f with the session's tab, once the call has its turn, starting
// Chromium on first use and opening the session's tab on its first call. The
// context f gets ends with the call's.
func (b *browser) use(ctx context.Context, session string, f func(tab context.Context) error) error {
	if b.execPath == "" {
		return sdk.Errorf(sdk.CodeToolExec, notFound)
	}
	select {
	case b.lock <- struct{}{}:
		defer func() { <-b.lock }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := b.start(ctx, session); err != nil {
		return err
	}
	t, ok := b.tabs[session]
	if !ok {
		t, _ = chromedp.NewContext(b.tab) // closed with the browser
		if err := chromedp.Do(t, chromedp.EmulateViewport(b.view.Width, b.view.Height)); err != nil {
			return sdk.Errorf(sdk.CodeToolExec, "open a tab: %v", err)
		}
		b.tabs[session] = t
	}
	tab, cancel := context.WithCancel(t)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	return f(tab)
}

// start starts Chromium unless it runs; it also replaces one that died. The
// first tab belongs to session.
func (b *browser) start(ctx context.Context, session string) error {
	if b.tab != nil && b.tab.Err() == nil {
		return nil
	}
	if b.stop != nil { // it died: release what is left of it
		b.stop()
	}
	// A refused request is a network error in the page, whatever its kind.
	proxy, err := netpolicy.NewProxy(b.dialer, &netpolicy.ProxyOptions{CloseOnRefusal: true})
	if err != nil {
		return sdk.Errorf(sdk.CodeToolExec, "start the network policy proxy: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], // headless, no first run, no background networking, no sync
		chromedp.ExecPath(b.execPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
	) // and no user-data-dir: chromedp makes a fresh temporary one, removed by stop
	opts = append(opts, proxyFlags(proxy.URL())...)
	if !b.headless {
		opts = append(opts, chromedp.VisibleWindow)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	stop := func() {
		cancelTab()
		cancelAlloc()
		_ = proxy.Close()
	}
	// The first run starts the browser and binds its life to the context it
	// gets, so it gets the tab's own context, and ctx is watched beside it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(tab, chromedp.EmulateViewport(b.view.Width, b.view.Height)) }()
	select {
	case err := <-started:
		if err != nil {
			stop()
			return sdk.Errorf(sdk.CodeToolExec, "start Chromium (%s): %v", b.execPath, err)
		}
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
	b.tab, b.stop, b.tabs, b.proxy = tab, stop, map[string]context.Context{session: tab}, proxy
	return nil
}

// proxyFlags send every request of Chromium through the proxy at proxyURL
// and close the paths around it (each checked against Chromium 156):
//   - --proxy-server: every scheme (http, https and ws/wss by CONNECT);
//   - --proxy-bypass-list=<-loopback>: loopback too, which Chromium
//     otherwise reaches directly;
//   - --host-resolver-rules: Chromium resolves nothing itself; any host but
//     the proxy's 127.0.0.1, IP literals included, is "not found" were a
//     request ever to go around the proxy;
//   - --webrtc-ip-handling-policy=disable_non_proxied_udp: WebRTC sends no
//     UDP (--force-webrtc-ip-handling-policy, also seen in the wild, is not
//     a switch Chromium knows).
func proxyFlags(proxyURL string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ProxyServer(proxyURL),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("webrtc-ip-handling-policy", "disable_non_proxied_udp"),
	}
}

// close stops Chromium, if it runs, once no call uses it.
func (b *browser) close() {
	b.lock <- struct{}{}
	defer func() { <-b.lock }()
	if b.stop != nil {
		b.stop()
		b.tab, b.stop, b.tabs, b.proxy = nil, nil, nil, nil
	}
}

func (b *browser) navigate(ctx context.Context, req *sdk.Request[NavigateArgs]) (pageInfo, error) {
	u, err := b.checkURL(ctx, req.Args.URL)
	if err != nil {
		return pageInfo{}, err
	}
	var p pageInfo
	err = b.use(ctx, req.Call.Session, func(tab context.Context) error {
		ref, err := b.load(tab, u, req.Progress)
		if ref != nil {
			return sdk.Errorf(sdk.CodePolicy, "chrome: loading %s: %v", u.Redacted(), ref)
		}
		if err == nil {
			p.URL, err = chromedp.Run(tab, chromedp.Location())
		}
		if err == nil {
			p.Title, err = chromedp.Run(tab, chromedp.Title())
		}
		return err
	})
	if err != nil {
		return pageInfo{}, err
	}
	return p, nil
}

// checkURL parses a URL to load and checks it before the browser sees it:
// absolute (validation), http or https (policy), and a host the policy
// permits by name and by every address it resolves to (policy).
func (b *browser) checkURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs():
		return nil, sdk.Errorf(sdk.CodeValidation, "url %q: not an absolute http or https URL", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, sdk.Errorf(sdk.CodePolicy, "chrome: url %q: the %s: scheme is refused; only http and https pages can be loaded", raw, u.Scheme)
	case u.Hostname() == "":
		return nil, sdk.Errorf(sdk.CodeValidation, "url %q: no host", raw)
	}
	if _, err := b.dialer.Check(ctx, u.Hostname()); err != nil {
		if errors.As(err, new(*netpolicy.Refusal)) {
			return nil, sdk.Errorf(sdk.CodePolicy, "chrome: %v", err)
		}
		return nil, sdk.Errorf(sdk.CodeToolExec, "chrome: url %q: %v", u.Redacted(), err)
	}
	return u, nil
}

// load loads u in the tab and returns, beside the navigation's error, the
// proxy's refusal of the page or of a redirect on its way, if any: the
// latest refusal since the navigation began of a host the tab's main frame
// asked for a document. Calls take turns on the browser, so a refusal of
// such a host in that time is this navigation's.
func (b *browser) load(tab context.Context, u *url.URL, progress func(done, total float64, message string)) (*netpolicy.Refusal, error) {
	mark := b.proxy.Mark()
	mainFrame := string(chromedp.FromContext(tab).Target.TargetID) // a tab's main frame has its target's id
	var mu sync.Mutex
	hosts := map[string]bool{strings.ToLower(u.Hostname()): true}
	lctx, cancel := context.WithCancel(tab)
	defer cancel()
	// The load's progress, of loadSteps: each request of the main frame's
	// document (redirects too), its response, DOMContentLoaded, load.
	const loadSteps = 4
	err := chromedp.Listen(lctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if e.Type != network.ResourceTypeDocument || string(e.FrameID) != mainFrame {
				return
			}
			progress(1, loadSteps, "requesting "+e.Request.URL)
			if du, err := url.Parse(e.Request.URL); err == nil {
				mu.Lock()
				hosts[strings.ToLower(du.Hostname())] = true
				mu.Unlock()
			}
		case *network.EventResponseReceived:
			if e.Type == network.ResourceTypeDocument && string(e.FrameID) == mainFrame {
				progress(2, loadSteps, fmt.Sprintf("response %d from %s", e.Response.Status, e.Response.URL))
			}
		case *page.EventDomContentEventFired:
			progress(3, loadSteps, "DOMContentLoaded")
		case *page.EventLoadEventFired:
			progress(loadSteps, loadSteps, "loaded")
		}
	})
	if err == nil {
		err = chromedp.Do(tab, chromedp.Navigate(u.String()))
	}
	refusals := b.proxy.Since(mark)
	mu.Lock()
	defer mu.Unlock()
	for i := len(refusals) - 1; i >= 0; i-- {
		if hosts[strings.ToLower(refusals[i].Host)] {
			return &refusals[i], err
		}
	}
	return nil, err
}

func (b *browser) getText(ctx context.Context, req *sdk.Request[TextArgs]) (*sdk.Result, error) {
	selector := cmp.Or(req.Args.Selector, "body")
	quoted, err := json.Marshal(selector)
	if err != nil {
		return nil, err
	}
	var text *string
	err = b.use(ctx, req.Call.Session, func(tab context.Context) error {
		var err error
		text, err = chromedp.Run(tab, chromedp.Evaluate[*string](fmt.Sprintf(textScript, quoted)))
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case text == nil:
		return nil, sdk.Errorf(sdk.CodeToolExec, "no element matches the selector %q", selector)
	}
	return sdk.Text(*text), nil
}
