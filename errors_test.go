package toolhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRetryAfter: a rate_limited error's retry time survives wrapping (by
// Errorf's %w and fmt's), matches ErrRateLimited, and reaches the JSON of
// the error as retry_after_ms, rounded up; other errors carry none.
func TestRetryAfter(t *testing.T) {
	limited := &Error{Code: CodeRateLimited, Message: "slow down", RetryAfter: 11*time.Second + 500*time.Microsecond}
	for _, err := range []error{limited, Errorf(CodeRateLimited, "call: %w", limited), fmt.Errorf("api: %w", limited)} {
		if !errors.Is(err, ErrRateLimited) || RetryAfter(err) != limited.RetryAfter {
			t.Fatalf("%v: is %v, retry after %s", err, errors.Is(err, ErrRateLimited), RetryAfter(err))
		}
		b, _ := json.Marshal(ErrorResult(err).Error)
		if want := `"code":"rate_limited"`; !strings.Contains(string(b), want) || !strings.Contains(string(b), `"retry_after_ms":11001`) {
			t.Fatalf("%s", b)
		}
	}
	b, _ := json.Marshal(InfoOf(ErrPolicy))
	if RetryAfter(ErrPolicy) != 0 || strings.Contains(string(b), "retry_after_ms") {
		t.Fatalf("policy: %s", b)
	}
}
