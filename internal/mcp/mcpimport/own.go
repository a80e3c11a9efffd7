package mcpimport

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// toolhost's own variables (TOOLHOST_TOKEN, the admin token, above all)
// are never passed on to an imported server. A client's file may refer to
// them, for a server that talks to toolhost itself; written as env("…"),
// such a reference would hand toolhost's admin token to a third party's
// code, and to the probe that starts it.

// ownVarRE matches a reference to one of toolhost's variables, as a client
// or a shell writes it: ${TOOLHOST_X}, ${env:TOOLHOST_X} or $TOOLHOST_X.
var ownVarRE = regexp.MustCompile(`\$(?:\{(?:env:)?(TOOLHOST_[A-Za-z0-9_]*)\}|(TOOLHOST_[A-Za-z0-9_]*))`)

// ownVars lists the toolhost variables s refers to.
func ownVars(s string) []string {
	var names []string
	for _, m := range ownVarRE.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1]+m[2])
	}
	return names
}

// isOwnVar reports whether name is one of toolhost's variables.
func isOwnVar(name string) bool { return strings.HasPrefix(name, "TOOLHOST_") }

// leaveOutOwnVars takes toolhost's variables out of s's entry, returning a
// warning for each place it left one out: an env entry or a header that
// names or refers to one is left out whole, and a reference in an argument
// is cut from it, the argument staying in its place. A server whose
// command or url refers to one is left out whole (keep is false).
func leaveOutOwnVars(file string, s *mcpServer) (warnings []string, keep bool) {
	e := &s.entry
	where := strconv.Quote(s.name)
	warn := func(what string, names []string) {
		warnings = append(warnings, fmt.Sprintf("%s: %s %s refers to %s, toolhost's own: left out, never passed to the server", file, where, what, strings.Join(names, ", ")))
	}
	for what, v := range map[string]string{"command": e.Command, "url": e.URL} {
		if names := ownVars(v); len(names) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %s %s refers to %s, toolhost's own: the server is left out, never given it", file, where, what, strings.Join(names, ", ")))
			return warnings, false
		}
	}
	for i, a := range e.Args {
		if names := ownVars(a); len(names) > 0 {
			warn("args["+strconv.Itoa(i)+"]", names)
			e.Args[i] = ownVarRE.ReplaceAllString(a, "")
		}
	}
	for _, attr := range []struct {
		name string
		m    map[string]string
	}{{"env", e.Env}, {"header", e.Headers}} {
		for _, k := range slices.Sorted(maps.Keys(attr.m)) {
			names := ownVars(attr.m[k])
			if isOwnVar(k) && attr.name == "env" {
				names = append([]string{k}, names...)
			}
			if len(names) > 0 {
				warn(attr.name+" "+k, slices.Compact(names))
				delete(attr.m, k)
			}
		}
	}
	if len(warnings) > 0 {
		s.comments = append(s.comments, "# left out: what refers to toolhost's own variables (TOOLHOST_*), never passed to a server")
	}
	return warnings, true
}
