package mcpfront

import (
	"io"
	"os"
	"testing"
)

// opaqueReader hides what its reader is.
type opaqueReader struct{ io.ReadCloser }

// TestCloseEndsRead: closing a pipe (io.Pipe, os.Pipe) ends a Read under
// way, so `toolhost mcp` reads in Read itself; closing a reader it cannot
// tell may not, so it reads ahead.
func TestCloseEndsRead(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	pr, _ := io.Pipe()
	for _, tt := range []struct {
		name string
		in   io.Reader
		want bool
	}{
		{"io.Pipe", pr, true},
		{"os.Pipe", r, true},
		{"opaque", opaqueReader{pr}, false},
	} {
		if got := closeEndsRead(tt.in); got != tt.want {
			t.Errorf("%s: closeEndsRead = %v, want %v", tt.name, got, tt.want)
		}
	}
}
