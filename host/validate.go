package host

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolhost/toolhost"
)

// argCheck validates one tool's arguments against its input schema.
type argCheck struct {
	schema     *jsonschema.Resolved
	emptyValid bool // {} passes, so an empty call skips the work
}

// compileChecks resolves the input schema of each tool of a spec that has
// passed GroupSpec.Validate.
func compileChecks(spec *toolhost.GroupSpec) (map[string]*argCheck, error) {
	checks := make(map[string]*argCheck, len(spec.Tools))
	for _, t := range spec.Tools {
		var s jsonschema.Schema
		if err := json.Unmarshal(t.InputSchema, &s); err != nil {
			return nil, err
		}
		r, err := s.Resolve(nil)
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodeInvalidGroupDef, "tool %s: input schema: %v", t.Name, err)
		}
		checks[t.Name] = &argCheck{schema: r, emptyValid: r.Validate(map[string]any{}) == nil}
	}
	return checks, nil
}

// check validates raw arguments; the error has code validation and names
// the field and the rule it breaks.
func (c *argCheck) check(raw json.RawMessage) error {
	if c.emptyValid && isEmptyObject(raw) {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return toolhost.Errorf(toolhost.CodeValidation, "arguments are not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return toolhost.Errorf(toolhost.CodeValidation, "arguments must be a JSON object, not %s", strings.TrimSpace(string(raw)))
	}
	if err := c.schema.Validate(v); err != nil {
		return toolhost.Errorf(toolhost.CodeValidation, "arguments: %s", describeSchemaError(err.Error()))
	}
	return nil
}

func isEmptyObject(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "{}" || s == "" || s == "null"
}

// describeSchemaError turns jsonschema's nested "validating /properties/a:
// validating /properties/a/items: rule" into "field a[]: rule".
func describeSchemaError(msg string) string {
	msg = strings.TrimPrefix(msg, "validating root: ")
	i := strings.LastIndex(msg, "validating /")
	if i < 0 {
		return msg
	}
	path, rule, ok := strings.Cut(msg[i+len("validating "):], ": ")
	if !ok {
		return msg
	}
	field := strings.TrimPrefix(path, "/properties/")
	field = strings.ReplaceAll(field, "/properties/", ".")
	field = strings.ReplaceAll(field, "/items", "[]")
	return fmt.Sprintf("field %s: %s", field, rule)
}
