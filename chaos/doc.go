// Package chaos holds the host's chaos tests: a real host with real
// subprocess plugins, put under load and faults (a plugin SIGKILLed under
// 1,000 calls, a plugin that hangs, one that crash-loops, the host itself
// SIGKILLed, 100,000 calls in a row), checking that every call ends with its
// named error within the stated bounds, that no event is lost and that
// nothing leaks.
//
// The tests re-execute their own binary as the plugins (see TestMain). They
// live apart from package host so that scripts/test runs them without the
// race detector, whose cost would distort the load they apply.
package chaos
