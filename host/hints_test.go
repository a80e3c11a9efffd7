package host

import (
	"encoding/json"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
)

// TestSettingsOverNullAnnotations: a module that reports "annotations":
// null for a tool whose block sets a hint gets the block's hint, where the
// host panicked before (json.Unmarshal of null into the defaults' map made
// it nil, and maps.Copy wrote into it): a hostile module could crash the
// host with one line of its spec.
func TestSettingsOverNullAnnotations(t *testing.T) {
	for _, own := range []string{"null", "", `{"readOnlyHint":false,"title":"x"}`, `[1]`} {
		spec := &toolhost.GroupSpec{ID: "g", Tools: []toolhost.ToolSpec{{Name: "t", Annotations: json.RawMessage(own)}}}
		withSettings(spec, &config.Plugin{Tools: map[string]config.ToolSettings{"t": {Hints: map[string]bool{"readOnlyHint": true}}}})
		var got map[string]bool
		if err := json.Unmarshal(spec.Tools[0].Annotations, &got); err != nil || !got["readOnlyHint"] {
			t.Errorf("annotations %q: %s, %v, want the block's readOnlyHint", own, spec.Tools[0].Annotations, err)
		}
	}
}
