package toolhost

import (
	"testing"
	"time"
)

// TestPseudoVersion: a build that has only its commit (stamped by
// scripts/build, or recorded without a module version) is named as go
// build names a checkout's commit.
func TestPseudoVersion(t *testing.T) {
	when := time.Date(2026, 12, 2, 23, 50, 12, 0, time.UTC)
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		b    BuildInfo
		want string
	}{
		{BuildInfo{Revision: rev, Time: when}, "v0.0.0-20261202235012-0123456789ab"},
		{BuildInfo{Revision: rev, Time: when, Modified: true}, "v0.0.0-20261202235012-0123456789ab+dirty"},
		{BuildInfo{Revision: rev, Modified: true}, "0123456789ab+dirty"},
		{BuildInfo{Revision: "abc"}, "devel"},
		{BuildInfo{}, "devel"},
	} {
		if got := pseudoVersion(tt.b); got != tt.want {
			t.Errorf("pseudoVersion(%+v) = %q, want %q", tt.b, got, tt.want)
		}
	}
}
