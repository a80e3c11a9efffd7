package protocol

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolhost/toolhost"
)

// The protocol's limits on what a provider may report.
const (
	MaxTools     = 1000    // tools in one group
	maxSpecBytes = 4 << 20 // a group spec on the wire
)

var (
	groupIDPattern  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	toolNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// reservedGroupIDs are the ids only first-party modules and the runtime may use.
var reservedGroupIDs = []string{"org_management", "artifact", "workspace", "command", "network", "context", "console", "tool_search"}

// ReservedGroupIDs returns the group ids only first-party modules and the
// agent runtime may provide: a new slice on each call, the caller's to change.
func ReservedGroupIDs() []string { return slices.Clone(reservedGroupIDs) }

// IsReserved reports whether id is one of [ReservedGroupIDs].
func IsReserved(id string) bool { return slices.Contains(reservedGroupIDs, id) }

// ValidToolName reports whether name is a well-formed tool name.
func ValidToolName(name string) bool { return toolNamePattern.MatchString(name) }

// ValidGroupID reports whether id is a well-formed group id.
func ValidGroupID(id string) bool { return groupIDPattern.MatchString(id) }

// ValidateGroup checks a group spec, whatever its source (a plugin, an MCP
// server, the agent runtime), against the protocol's limits: a well-formed
// id, at most [MaxTools] tools with well-formed, distinct names, and an input
// schema on each that is a valid JSON-schema object. Errors have code
// invalid_group_def and name the offending tool.
func ValidateGroup(g *toolhost.GroupSpec) error {
	if !ValidGroupID(g.ID) {
		return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group id %q does not match %s", g.ID, groupIDPattern)
	}
	if len(g.Tools) > MaxTools {
		return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s has %d tools, more than the limit of %d", g.ID, len(g.Tools), MaxTools)
	}
	seen := make(map[string]bool, len(g.Tools))
	for i := range g.Tools {
		t := &g.Tools[i]
		if !ValidToolName(t.Name) {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: tool name %q does not match %s", g.ID, t.Name, toolNamePattern)
		}
		if seen[t.Name] {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: tool %s is declared twice", g.ID, t.Name)
		}
		seen[t.Name] = true
		if err := checkInputSchema(t.InputSchema); err != nil {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: tool %s: input schema: %v", g.ID, t.Name, err)
		}
		if t.Timeout < 0 {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: tool %s: negative timeout", g.ID, t.Name)
		}
	}
	return nil
}

// checkInputSchema reports whether raw is a JSON-schema object that resolves.
func checkInputSchema(raw json.RawMessage) error {
	if len(raw) == 0 {
		return fmt.Errorf("missing")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	if s.Type != "object" && !slices.Contains(s.Types, "object") {
		return fmt.Errorf(`type must be "object"`)
	}
	_, err := s.Resolve(nil)
	return err
}
