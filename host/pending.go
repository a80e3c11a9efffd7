package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/redact"
)

// maxApprovalPreview bounds what an approval keeps of a call's arguments
// for its approver to see, in memory and in the store: the redacted
// arguments, or a JSON string of their first maxApprovalPreview bytes.
const maxApprovalPreview = 16 << 10

// approvalArguments returns what an approval of a call with the arguments
// args keeps of them: the preview, and the full arguments' size and
// SHA-256.
func approvalArguments(args json.RawMessage) (preview json.RawMessage, size int64, sum string) {
	preview, _ = redact.JSON(args)
	if len(preview) > maxApprovalPreview {
		cut := string(preview[:maxApprovalPreview])
		b, _ := json.Marshal(cut + "… (cut: the arguments are " + byteCount(int64(len(args))) + ")")
		preview = b
	}
	return preview, int64(len(args)), argumentsDigest(args)
}

// argumentsDigest is the SHA-256 of a call's arguments, in hex.
func argumentsDigest(args json.RawMessage) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// pendingWork bounds, per credential, the calls of this host waiting for an
// approval and the bytes of their arguments, which each holds until it is
// decided: what a credential can make freely (agents, sessions, keys)
// shares its credential's bound.
type pendingWork struct {
	maxCalls int   // per credential
	maxBytes int64 // per credential

	mu    sync.Mutex
	calls map[string]int
	bytes map[string]int64
}

func newPendingWork(maxCalls int, maxBytes int64) *pendingWork {
	return &pendingWork{maxCalls: maxCalls, maxBytes: maxBytes, calls: map[string]int{}, bytes: map[string]int64{}}
}

// hold counts in a call of cred, whose arguments are size bytes, that is
// about to wait for an approval, and returns the function that counts it
// out; it fails with rate_limited when the call would take cred past a
// bound.
func (p *pendingWork) hold(cred string, size int64) (func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	who := cred
	if who == "" {
		who = "the embedding program"
	}
	switch {
	case p.calls[cred]+1 > p.maxCalls:
		return nil, toolhost.Errorf(toolhost.CodeRateLimited,
			"%s has %d calls waiting for an approval, the most it may (executor { max_pending_approvals }): wait until one is decided",
			who, p.calls[cred])
	case p.bytes[cred]+size > p.maxBytes:
		return nil, toolhost.Errorf(toolhost.CodeRateLimited,
			"%s has calls with %s of arguments waiting for an approval; this one's %s would pass the bound of %s (executor { max_pending_approval_mb })",
			who, byteCount(p.bytes[cred]), byteCount(size), byteCount(p.maxBytes))
	}
	p.calls[cred]++
	p.bytes[cred] += size
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.calls[cred]--; p.calls[cred] == 0 {
				delete(p.calls, cred)
				delete(p.bytes, cred)
			} else {
				p.bytes[cred] -= size
			}
		})
	}, nil
}

// byteCount says n bytes for a person: in MiB from 1 MiB on.
func byteCount(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
