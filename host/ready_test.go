package host

import (
	"context"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/store"
)

// TestReadyNamesWhatFails: a started host is ready; once its store stops
// answering it is not, and says so; a closing host is not either.
func TestReadyNamesWhatFails(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := newTestHost(t, nil, st)
	if err := h.Ready(context.Background()); err != nil {
		t.Fatalf("a started host: %v", err)
	}
	_ = st.Close()
	if err := h.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "the store does not answer") {
		t.Fatalf("with its store closed: %v", err)
	}
	_ = h.Close()
	if err := h.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "closing") {
		t.Fatalf("a closed host: %v", err)
	}
}
