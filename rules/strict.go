package rules

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// strictJSON decodes the JSON object data into v, a pointer to a struct,
// strictly: a key that is not the JSON name of one of v's fields, spelled
// exactly, is an error naming it. encoding/json alone would pass over a
// key it does not know and take "Calls" or "CALLS" for "calls", the last
// of them winning; and a custom UnmarshalJSON does not inherit a
// decoder's DisallowUnknownFields.
func strictJSON(data []byte, v any) error {
	var keys map[string]json.RawMessage
	if json.Unmarshal(data, &keys) == nil {
		t := reflect.TypeOf(v).Elem()
		names := map[string]bool{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			names[name] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !names[k] {
				return fmt.Errorf("unknown field %q", k)
			}
		}
	}
	return json.Unmarshal(data, v)
}
