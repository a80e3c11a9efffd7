// Package e2e holds the end-to-end tests of the first-party modules: each
// module built, run by a host as a real subprocess, and every tool called
// through Host.Call, as an agent's calls would go.
package e2e
