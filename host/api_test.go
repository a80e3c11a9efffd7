package host_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/toolhost/toolhost/host"
)

// maxHostMethods bounds the exported methods of *host.Host: what an embedder
// must hold in their head. Grow a handle ([host.Roles], [host.Agents], …)
// instead; raising this takes changing this test, in the same commit.
const maxHostMethods = 20

// TestHostMethods holds *host.Host to its verbs and handles: at most
// maxHostMethods, exactly these.
func TestHostMethods(t *testing.T) {
	want := []string{"Agents", "Approvals", "Artifacts", "Call", "CallBatch", "Close", "Config", "Events",
		"Logger", "Metrics", "Modules", "Ready", "Roles", "Start", "Started", "Store", "Tokens", "Tools",
		"TracerProvider", "Watch"}
	typ := reflect.TypeFor[*host.Host]()
	var got []string
	for m := range typ.Methods() {
		got = append(got, m.Name)
	}
	if len(got) > maxHostMethods {
		t.Errorf("*host.Host has %d exported methods, at most %d: %v", len(got), maxHostMethods, got)
	}
	if !slices.Equal(got, want) {
		t.Errorf("*host.Host's methods are %v, want %v: a new verb belongs on a handle, or in this list and the package comment", got, want)
	}
}
