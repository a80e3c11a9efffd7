package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/toolhost/toolhost/sdk"
)

// SelectorArgs name one element.
type SelectorArgs struct {
	Selector string `json:"selector" jsonschema:"a CSS selector; the first matching element is used"`
}

// HTMLArgs are the arguments of get_html.
type HTMLArgs struct {
	Selector string `json:"selector,omitempty" jsonschema:"a CSS selector (default: the whole document)"`
}

// TypeArgs are the arguments of type.
type TypeArgs struct {
	Selector string `json:"selector" jsonschema:"a CSS selector of the field to type into"`
	Text     string `json:"text" jsonschema:"the text to type"`
}

// WaitArgs are the arguments of wait_visible.
type WaitArgs struct {
	Selector       string `json:"selector" jsonschema:"a CSS selector"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"give up after this many seconds (default 10)"`
}

// EvalArgs are the arguments of evaluate.
type EvalArgs struct {
	Expression string `json:"expression" jsonschema:"a JavaScript expression; its value must be JSON-serialisable (a promise is awaited)"`
}

// ShotArgs are the arguments of screenshot.
type ShotArgs struct {
	Selector string `json:"selector,omitempty" jsonschema:"a CSS selector: capture that element only"`
	FullPage bool   `json:"full_page,omitempty" jsonschema:"capture the whole page, not just the viewport"`
}

// htmlScript evaluates to the outerHTML of the first element matching the
// selector given as a JSON string, or null.
const htmlScript = `(() => { const e = document.querySelector(%s); return e ? e.outerHTML : null })()`

// query runs a script built from a selector and fails clearly when nothing
// matches.
func (b *browser) query(ctx context.Context, session, script, selector string) (string, error) {
	quoted, err := json.Marshal(selector)
	if err != nil {
		return "", err
	}
	var out *string
	err = b.use(ctx, session, func(tab context.Context) error {
		var err error
		out, err = chromedp.Run(tab, chromedp.Evaluate[*string](fmt.Sprintf(script, quoted)))
		return err
	})
	switch {
	case err != nil:
		return "", err
	case out == nil:
		return "", sdk.Errorf(sdk.CodeToolExec, "no element matches the selector %q", selector)
	}
	return *out, nil
}

func (b *browser) getHTML(ctx context.Context, req *sdk.Request[HTMLArgs]) (*sdk.Result, error) {
	html, err := b.query(ctx, req.Call.Session, htmlScript, cmp.Or(req.Args.Selector, "html"))
	if err != nil {
		return nil, err
	}
	return sdk.Text(html), nil
}

// act runs one action on the session's tab.
func (b *browser) act(ctx context.Context, session string, a chromedp.Action[chromedp.Void]) error {
	return b.use(ctx, session, func(tab context.Context) error { return chromedp.Do(tab, a) })
}

func (b *browser) click(ctx context.Context, req *sdk.Request[SelectorArgs]) (*sdk.Result, error) {
	if err := b.act(ctx, req.Call.Session, chromedp.Click(req.Args.Selector)); err != nil {
		return nil, err
	}
	return sdk.Text("clicked " + req.Args.Selector), nil
}

func (b *browser) typeText(ctx context.Context, req *sdk.Request[TypeArgs]) (*sdk.Result, error) {
	if err := b.act(ctx, req.Call.Session, chromedp.SendKeys(req.Args.Selector, req.Args.Text)); err != nil {
		return nil, err
	}
	return sdk.Text(fmt.Sprintf("typed %d characters into %s", len([]rune(req.Args.Text)), req.Args.Selector)), nil
}

func (b *browser) waitVisible(ctx context.Context, req *sdk.Request[WaitArgs]) (*sdk.Result, error) {
	wait := time.Duration(cmp.Or(req.Args.TimeoutSeconds, 10)) * time.Second
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := b.act(wctx, req.Call.Session, chromedp.WaitVisible(req.Args.Selector))
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, sdk.Errorf(sdk.CodeTimeout, "%s did not become visible within %s", req.Args.Selector, wait)
	}
	if err != nil {
		return nil, err
	}
	return sdk.Text(req.Args.Selector + " is visible"), nil
}

func (b *browser) evaluate(ctx context.Context, req *sdk.Request[EvalArgs]) (*sdk.Result, error) {
	var v json.RawMessage
	err := b.use(ctx, req.Call.Session, func(tab context.Context) error {
		var err error
		v, err = chromedp.Run(tab, chromedp.Evaluate[json.RawMessage](req.Args.Expression, chromedp.EvalAwaitPromise))
		return err
	})
	if err != nil {
		return nil, sdk.Errorf(sdk.CodeToolExec, "evaluate: %v", err)
	}
	return sdk.Text(string(v)), nil
}

func (b *browser) currentURL(ctx context.Context, req *sdk.Request[struct{}]) (*sdk.Result, error) {
	var u string
	err := b.use(ctx, req.Call.Session, func(tab context.Context) error {
		var err error
		u, err = chromedp.Run(tab, chromedp.Location())
		return err
	})
	if err != nil {
		return nil, err
	}
	return sdk.Text(u), nil
}

// screenshot captures a PNG, saves it under the screenshot directory and
// returns its path and size, with the image attached.
func (b *browser) screenshot(ctx context.Context, req *sdk.Request[ShotArgs]) (*sdk.Result, error) {
	var png []byte
	err := b.use(ctx, req.Call.Session, func(tab context.Context) error {
		var err error
		switch {
		case req.Args.Selector != "":
			png, err = chromedp.Run(tab, chromedp.Screenshot(req.Args.Selector))
		case req.Args.FullPage:
			png, err = chromedp.Run(tab, chromedp.FullScreenshot(100))
		default:
			png, err = chromedp.Run(tab, chromedp.CaptureScreenshot())
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("screenshot-%s.png", time.Now().UTC().Format("20060102-150405.000000000"))
	path := filepath.Join(b.shots, name)
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolExec, "screenshot directory: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolExec, "save screenshot: %v", err)
	}
	abs, _ := filepath.Abs(path)
	res := sdk.Text(fmt.Sprintf("saved %s (%d bytes)", abs, len(png)))
	res.Meta = map[string]any{"path": abs, "bytes": len(png)}
	res.Attachments = []sdk.Attachment{{Name: name, MimeType: "image/png", Data: png}}
	return res, nil
}
