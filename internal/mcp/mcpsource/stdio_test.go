package mcpsource

import (
	"context"
	"os"
	"testing"
)

// TestLongNotification: a notification of a stdio server over MaxLine is
// dropped; the call it came with is answered, and the session goes on.
func TestLongNotification(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startServer(t, Options{Command: exe, Env: map[string]string{testServerEnv: "long-notice"}})
	for range 2 {
		if got := call(t, context.Background(), s, "echo", `{"text":"hi"}`); got != "hi" {
			t.Errorf("echo: %q", got)
		}
	}
	if err := s.Exited().Err(); err != nil {
		t.Errorf("the session ended: %v", context.Cause(s.Exited()))
	}
}
