package host

import "time"

// SetRoleLimit gives role one call limit (see limit), for the tests of
// package host_test that call through the HTTP API and MCP, until roles
// carry their limit blocks. Call it before the host's first call.
func SetRoleLimit(h *Host, role, target string, calls int, per time.Duration) {
	h.roleLimits = limitsOf(role, limit{target, calls, per})
}
