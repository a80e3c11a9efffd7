package server

import (
	"strings"
	"testing"
)

// TestUISkippedTools: the groups page and a role's page count the tools a
// group offers, and list the one it does not with why.
func TestUISkippedTools(t *testing.T) {
	srv, _ := serveClash(t)
	b := newBrowser(t, srv.URL)
	const skipped = "read_file (skipped: group workspace serves a tool of the same name)"

	b.open("#/groups", "groups")
	if got := b.text(`#groups tr[data-group="files"] summary`); got != "2 (1 skipped)" {
		t.Errorf("groups page: files's count %q", got)
	}
	if got := b.text(`#groups tr[data-group="files"] li.skipped`); got != skipped {
		t.Errorf("groups page: files's skipped tool %q", got)
	}

	b.open("#/roles/reader", "role")
	card := `.group-card[data-group="files"]`
	if got := b.text(card + " .tool-count"); got != "2 tools, 1 skipped" {
		t.Errorf("role page: files's count %q", got)
	}
	if items := b.text(card + " details.tools"); !strings.Contains(items, "directory_tree") || !strings.Contains(items, skipped) {
		t.Errorf("role page: files's tools %q", items)
	}
}
