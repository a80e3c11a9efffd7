package server

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/toolhost/toolhost"
)

// The bounds on the request bodies a server holds at once, which a call
// keeps until it is answered (one waiting for an approval, for minutes):
// per credential, so that what one token sends at once cannot exhaust the
// host, and for the whole server. A body of unknown length counts as the
// largest allowed (maxBody).
const (
	maxInflightPerCredential = 64 << 20
	maxInflight              = 256 << 20
)

// inflight counts the bytes of the request bodies being handled, per
// credential and in all.
type inflight struct {
	mu    sync.Mutex
	total int64
	by    map[string]int64
}

// take counts in a request of cred with a body of n bytes, and returns the
// function that counts it out once it is answered; it fails with
// rate_limited when the request would pass a bound.
func (f *inflight) take(cred string, n int64) (func(), error) {
	if n <= 0 {
		return func() {}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.by[cred]+n > maxInflightPerCredential:
		return nil, &toolhost.Error{Code: toolhost.CodeRateLimited, RetryAfter: time.Second, Message: fmt.Sprintf(
			"%s has %d MiB of requests being handled (calls running or waiting for an approval); this one's %d MiB would pass the bound of %d MiB per credential: retry once one is answered",
			cred, f.by[cred]>>20, (n+1<<20-1)>>20, maxInflightPerCredential>>20)}
	case f.total+n > maxInflight:
		return nil, &toolhost.Error{Code: toolhost.CodeRateLimited, RetryAfter: time.Second, Message: fmt.Sprintf(
			"the server holds %d MiB of requests being handled, the most it may (%d MiB): retry once some are answered", f.total>>20, maxInflight>>20)}
	}
	if f.by == nil {
		f.by = map[string]int64{}
	}
	f.by[cred] += n
	f.total += n
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.total -= n
		if f.by[cred] -= n; f.by[cred] == 0 {
			delete(f.by, cred)
		}
	}, nil
}

// bodySize is what a request's body counts for: its declared length, or
// maxBody when it declares none.
func bodySize(r *http.Request) int64 {
	switch {
	case r.ContentLength >= 0:
		return min(r.ContentLength, maxBody)
	case r.Body == nil || r.Body == http.NoBody:
		return 0
	}
	return maxBody
}
