package protocol

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolhost/toolhost"
	"github.com/yosida95/uritemplate/v3"
)

// The protocol's limits on what a provider may report.
const (
	MaxTools     = 1000    // tools in one group; prompts, resources and templates too, each
	maxSpecBytes = 4 << 20 // a group spec on the wire
	MaxURI       = 4096    // bytes of a resource's URI or a template
)

var (
	groupIDPattern  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	toolNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// reservedGroupIDs are the ids only first-party modules and the runtime may use.
var reservedGroupIDs = []string{"org_management", "artifact", "workspace", "command", "network", "context", "console", "tool_search", "code"}

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
// schema on each that is a valid JSON-schema object, and valid prompts and
// resources (validateItems). Errors have code invalid_group_def and name
// the offending tool or item.
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
	return validateItems(g)
}

// validateItems checks a group's prompts, resources and resource
// templates: at most MaxTools of each; prompt names well-formed tool names
// and distinct; URIs and templates distinct, at most MaxURI bytes, with a
// scheme, a template valid under RFC 6570.
func validateItems(g *toolhost.GroupSpec) error {
	for kind, n := range map[string]int{"prompts": len(g.Prompts), "resources": len(g.Resources), "resource templates": len(g.ResourceTemplates)} {
		if n > MaxTools {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s has %d %s, more than the limit of %d", g.ID, n, kind, MaxTools)
		}
	}
	seen := map[string]bool{}
	for _, p := range g.Prompts {
		if !ValidToolName(p.Name) {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: prompt name %q does not match %s", g.ID, p.Name, toolNamePattern)
		}
		if seen[p.Name] {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: prompt %s is declared twice", g.ID, p.Name)
		}
		seen[p.Name] = true
	}
	clear(seen)
	for _, r := range g.Resources {
		err := checkURI(r.URI, seen)
		if err == nil {
			_, err = url.Parse(r.URI)
		}
		if err != nil {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: resource %q: %v", g.ID, r.URI, err)
		}
	}
	for _, t := range g.ResourceTemplates {
		err := checkURI(t.URITemplate, seen)
		if err == nil {
			_, err = uritemplate.New(t.URITemplate)
		}
		if err != nil {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: resource template %q: %v", g.ID, t.URITemplate, err)
		}
	}
	return nil
}

// checkURI says what is wrong with a resource's URI or template, one of
// seen (which it joins) included.
func checkURI(uri string, seen map[string]bool) error {
	scheme, _, ok := strings.Cut(uri, ":")
	switch {
	case len(uri) > MaxURI:
		return fmt.Errorf("%d bytes, more than %d", len(uri), MaxURI)
	case !ok || scheme == "" || strings.ContainsAny(scheme, "/{?#"):
		return fmt.Errorf("no scheme")
	case seen[uri]:
		return fmt.Errorf("declared twice")
	}
	seen[uri] = true
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
