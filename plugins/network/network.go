package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost/netpolicy"
	"github.com/toolhost/toolhost/sdk"
)

// Defaults of the config and of a call.
const (
	defaultTimeout          = 30      // seconds a call may take when it names no timeout
	defaultMaxTimeout       = 60      // the config's max_timeout_seconds when it names none
	defaultMaxResponseBytes = 1 << 20 // the config's max_response_bytes when it names none
	defaultMaxRedirects     = 5       // the config's max_redirects when it names none
	userAgent               = "toolhost-network/0.1"
)

// allowedMethods are the methods http_request accepts.
var allowedMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// ignoredHeaders are request headers a call may name but which are dropped:
// the transport sets them from the URL and the body.
var ignoredHeaders = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true}

// settings is the builtin block's config {}.
type settings struct {
	// Config is the network policy: allow_hosts, deny_hosts, allow_private.
	netpolicy.Config
	// MaxResponseBytes caps the bytes of a response body read.
	MaxResponseBytes int64 `json:"max_response_bytes"`
	// MaxTimeoutSeconds caps each call's timeout_seconds.
	MaxTimeoutSeconds int `json:"max_timeout_seconds"`
	// MaxRedirects is how many redirects a request may follow; nil means 5.
	MaxRedirects *int `json:"max_redirects"`
}

// RequestArgs are the arguments of http_request.
type RequestArgs struct {
	Method         string            `json:"method,omitempty" jsonschema:"the HTTP method: GET (default), HEAD, POST, PUT, PATCH, DELETE or OPTIONS"`
	URL            string            `json:"url" jsonschema:"the absolute http or https URL to request"`
	Headers        map[string]string `json:"headers,omitempty" jsonschema:"request headers; Host, Content-Length, Transfer-Encoding and Connection are ignored; a redirect to another server keeps only Accept*, Cache-Control, Pragma, User-Agent and, with the body, Content-*"`
	Body           string            `json:"body,omitempty" jsonschema:"the request body"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"give up after this many seconds (default 30, at most the configured max_timeout_seconds)"`
}

// Response is what http_request returns: its structured content, and the
// same as JSON in stdout.
type Response struct {
	Status      int               `json:"status" jsonschema:"the HTTP status code"`
	StatusText  string            `json:"status_text" jsonschema:"the status line's text, such as 404 Not Found"`
	Headers     map[string]string `json:"headers" jsonschema:"the response headers, values of a repeated header joined by commas"`
	Body        string            `json:"body" jsonschema:"a text body, up to the size cap; a binary body's size, type and sha256"`
	BodyBytes   int               `json:"body_bytes" jsonschema:"the bytes of the body read"`
	Truncated   bool              `json:"truncated" jsonschema:"the body was longer than the size cap"`
	ContentType string            `json:"content_type" jsonschema:"the Content-Type header"`
	FinalURL    string            `json:"final_url" jsonschema:"the URL answered, after redirects"`
	Redirects   int               `json:"redirects" jsonschema:"how many redirects were followed"`
}

// client makes requests; configure sets it up before the first call.
type client struct {
	// dialer holds the policy and makes every connection; tests may
	// replace its resolver.
	dialer       *netpolicy.Dialer
	maxBytes     int64
	maxTimeout   int // seconds
	maxRedirects int
}

func newGroup() *sdk.Group { return newClient().group() }

// newClient returns a client with the default config.
func newClient() *client {
	return &client{
		maxBytes:     defaultMaxResponseBytes,
		maxTimeout:   defaultMaxTimeout,
		maxRedirects: defaultMaxRedirects,
		dialer:       &netpolicy.Dialer{Policy: &netpolicy.Policy{}},
	}
}

// group is the tool group around c.
func (c *client) group() *sdk.Group {
	return &sdk.Group{
		ID:          "network",
		Description: "Make HTTP(S) requests to public hosts and read the responses.",
		Version:     "0.1.0",
		OnConfigure: c.configure,
		Tools: []sdk.Tool{
			sdk.NewStructuredTool("http_request", "Make an HTTP or HTTPS request and return the status, headers and body (text bodies in full up to a size cap, binary bodies summarised). A non-2xx status is still a successful call. Loopback, private and link-local addresses are refused unless configured.", c.request, sdk.Title("Send HTTP request"), sdk.Destructive(), sdk.OpenWorld()),
		},
	}
}

func (c *client) configure(_ context.Context, req *sdk.ConfigureRequest) error {
	var s settings
	if err := sdk.DecodeConfig(req, &s); err != nil {
		return err
	}
	policy, err := netpolicy.Compile(s.Config)
	if err != nil {
		return sdk.Errorf(sdk.CodeValidation, "network: config: %v", err)
	}
	switch {
	case s.MaxResponseBytes < 0:
		return sdk.Errorf(sdk.CodeValidation, "network: config: max_response_bytes must be positive, not %d", s.MaxResponseBytes)
	case s.MaxResponseBytes == 0:
		s.MaxResponseBytes = defaultMaxResponseBytes
	}
	switch {
	case s.MaxTimeoutSeconds < 0:
		return sdk.Errorf(sdk.CodeValidation, "network: config: max_timeout_seconds must be positive, not %d", s.MaxTimeoutSeconds)
	case s.MaxTimeoutSeconds == 0:
		s.MaxTimeoutSeconds = defaultMaxTimeout
	}
	maxRedirects := defaultMaxRedirects
	if s.MaxRedirects != nil {
		if *s.MaxRedirects < 0 {
			return sdk.Errorf(sdk.CodeValidation, "network: config: max_redirects must not be negative, not %d", *s.MaxRedirects)
		}
		maxRedirects = *s.MaxRedirects
	}
	c.dialer.Policy, c.dialer.Upstream = policy, netpolicy.EnvUpstream() // a sandbox's proxy, when it runs in one
	c.maxBytes, c.maxTimeout, c.maxRedirects = s.MaxResponseBytes, s.MaxTimeoutSeconds, maxRedirects
	return nil
}

// checkURL refuses a URL that is not absolute http(s) (validation) or whose
// host the rules refuse by name (policy).
func (c *client) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return sdk.Errorf(sdk.CodeValidation, "url %q: only http and https URLs may be requested", u.Redacted())
	}
	if u.Host == "" || u.Hostname() == "" {
		return sdk.Errorf(sdk.CodeValidation, "url %q: not an absolute URL with a host", u.Redacted())
	}
	return c.dialer.Policy.CheckName(u.Hostname())
}

// timeout is how long a call asking for seconds (0: the default) may take.
func (c *client) timeout(seconds int) (time.Duration, error) {
	switch {
	case seconds < 0:
		return 0, sdk.Errorf(sdk.CodeValidation, "timeout_seconds must be positive, not %d", seconds)
	case seconds == 0:
		seconds = defaultTimeout
	}
	return time.Duration(min(seconds, c.maxTimeout)) * time.Second, nil
}

func (c *client) request(ctx context.Context, req *sdk.Request[RequestArgs]) (Response, error) {
	args := req.Args
	method := strings.ToUpper(strings.TrimSpace(args.Method))
	if method == "" {
		method = "GET"
	}
	if !slices.Contains(allowedMethods, method) {
		return Response{}, sdk.Errorf(sdk.CodeValidation, "method %q: must be one of %s", args.Method, strings.Join(allowedMethods, ", "))
	}
	u, err := url.Parse(args.URL)
	if err != nil {
		return Response{}, sdk.Errorf(sdk.CodeValidation, "url: %v", err)
	}
	if err := c.checkURL(u); err != nil {
		return Response{}, asResultError(err)
	}
	timeout, err := c.timeout(args.TimeoutSeconds)
	if err != nil {
		return Response{}, err
	}
	callCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var body io.Reader
	if args.Body != "" {
		body = strings.NewReader(args.Body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return Response{}, sdk.Errorf(sdk.CodeValidation, "request: %v", err)
	}
	for k, v := range args.Headers {
		if strings.ContainsAny(k, "\r\n: ") || k == "" || strings.ContainsAny(v, "\r\n") {
			return Response{}, sdk.Errorf(sdk.CodeValidation, "header %q: invalid name or value", k)
		}
		if ignoredHeaders[http.CanonicalHeaderKey(k)] {
			continue
		}
		hreq.Header.Set(k, v)
	}
	if hreq.Header.Get("User-Agent") == "" {
		hreq.Header.Set("User-Agent", userAgent)
	}

	transport := &http.Transport{
		Proxy:                 nil, // never a proxy from the environment
		DialContext:           c.dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	defer transport.CloseIdleConnections()
	redirects := 0
	hc := &http.Client{
		Transport: transport,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) > c.maxRedirects {
				return sdk.Errorf(sdk.CodeToolExec, "too many redirects (more than %d)", c.maxRedirects)
			}
			if err := c.checkURL(r.URL); err != nil {
				return err
			}
			dropForeignHeaders(r, via)
			redirects = len(via)
			return nil
		},
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return Response{}, c.failure(callCtx, ctx, timeout, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return Response{}, c.failure(callCtx, ctx, timeout, fmt.Errorf("reading the body: %w", err))
	}
	out := &Response{
		Status:      resp.StatusCode,
		StatusText:  statusText(resp),
		Headers:     make(map[string]string, len(resp.Header)),
		ContentType: resp.Header.Get("Content-Type"),
		FinalURL:    resp.Request.URL.String(),
		Redirects:   redirects,
	}
	if int64(len(data)) > c.maxBytes {
		data, out.Truncated = data[:c.maxBytes], true
	}
	out.BodyBytes = len(data)
	for k, vs := range resp.Header {
		out.Headers[k] = strings.Join(vs, ", ")
	}
	if isText(out.ContentType, data, out.Truncated) {
		out.Body = string(data)
	} else {
		ct := out.ContentType
		if ct == "" {
			ct = "(none)"
		}
		sum := sha256.Sum256(data)
		out.Body = fmt.Sprintf("binary body: %d bytes, content-type %s, sha256 %s", len(data), ct, hex.EncodeToString(sum[:]))
	}
	return *out, nil
}

// failure turns a transport error into the call's error: policy for a
// refusal, timeout when the call's own timeout passed, tool_exec otherwise.
func (c *client) failure(callCtx, ctx context.Context, timeout time.Duration, err error) error {
	var te interface{ Timeout() bool }
	switch {
	case errors.As(err, new(*netpolicy.Refusal)),
		errors.Is(err, sdk.Errorf(sdk.CodeToolExec, "")),
		errors.Is(err, sdk.Errorf(sdk.CodeValidation, "")):
		return asResultError(err)
	case callCtx.Err() != nil:
		return callCtx.Err()
	case ctx.Err() != nil || errors.As(err, &te) && te.Timeout():
		return sdk.Errorf(sdk.CodeTimeout, "the request ran past its timeout of %s", timeout)
	}
	return sdk.Errorf(sdk.CodeToolExec, "request failed: %v", err)
}

// asResultError unwraps a policy refusal or a coded error from the url.Error
// around it, so the message is the refusal's own.
func asResultError(err error) error {
	var ref *netpolicy.Refusal
	if errors.As(err, &ref) {
		return sdk.Errorf(sdk.CodePolicy, "network: %s", ref.Error())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func statusText(resp *http.Response) string {
	if t := http.StatusText(resp.StatusCode); t != "" {
		return t
	}
	_, t, _ := strings.Cut(resp.Status, " ")
	return t
}

// isText reports whether a body of the content type is text: text/*, JSON,
// XML, JavaScript, or, with no type, valid UTF-8 (a cut-off rune at the end
// of a truncated body forgiven).
func isText(contentType string, data []byte, truncated bool) bool {
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			mt = strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
		}
		switch {
		case strings.HasPrefix(mt, "text/"),
			mt == "application/json", mt == "application/xml",
			strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"),
			strings.Contains(mt, "javascript"):
			return true
		}
		return false
	}
	if truncated {
		for i := 0; i < utf8.UTFMax && len(data) > 0; i++ {
			if utf8.Valid(data) {
				return true
			}
			data = data[:len(data)-1]
		}
	}
	return utf8.Valid(data)
}
