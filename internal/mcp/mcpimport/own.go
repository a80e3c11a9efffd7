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

// ownRef is a reference to toolhost's variables in a value: s[start:end]
// of the value refers to names.
type ownRef struct {
	start, end int
	names      []string
}

// ownNameRE matches the name of one of toolhost's variables.
var ownNameRE = regexp.MustCompile(`\bTOOLHOST_[A-Za-z0-9_]*`)

// ownRefs finds the references to toolhost's variables in s, as a client
// or a shell writes them: $TOOLHOST_X, and every ${…} that names one,
// whatever else it holds (${TOOLHOST_X}, ${env:TOOLHOST_X},
// ${TOOLHOST_X:-default}, ${TOOLHOST_X-default}, ${TOOLHOST_X:=…},
// ${#TOOLHOST_X}, ${OTHER:-$TOOLHOST_X}…), as does a command substitution
// $(…) or `…` that names one. Each ${…} or $(…) runs to its matching
// brace or parenthesis, or to the end of s.
func ownRefs(s string) []ownRef {
	var refs []ownRef
	for i := 0; i < len(s); i++ {
		end := -1
		switch {
		case s[i] == '`':
			if j := strings.IndexByte(s[i+1:], '`'); j >= 0 {
				end = i + 1 + j + 1
			} else {
				end = len(s)
			}
		case s[i] != '$' || i+1 == len(s):
		case s[i+1] == '{' || s[i+1] == '(':
			end = closing(s, i+1)
		case strings.HasPrefix(s[i+1:], "TOOLHOST_"):
			end = i + 1 + len(ownNameRE.FindString(s[i+1:]))
		}
		if end < 0 {
			continue
		}
		if names := ownNameRE.FindAllString(s[i:end], -1); len(names) > 0 {
			refs = append(refs, ownRef{i, end, names})
			i = end - 1
		}
	}
	return refs
}

// closing returns the index just after the brace or parenthesis that
// closes the one at s[open], or len(s) when none does.
func closing(s string, open int) int {
	o, c := s[open], byte('}')
	if o == '(' {
		c = ')'
	}
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case o:
			depth++
		case c:
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// ownVars lists the toolhost variables s refers to.
func ownVars(s string) []string {
	var names []string
	for _, r := range ownRefs(s) {
		names = append(names, r.names...)
	}
	return slices.Compact(names)
}

// cutOwnVars returns s without its references to toolhost's variables.
func cutOwnVars(s string) string {
	var b strings.Builder
	last := 0
	for _, r := range ownRefs(s) {
		b.WriteString(s[last:r.start])
		last = r.end
	}
	return b.String() + s[last:]
}

// isOwnVar reports whether name is one of toolhost's variables.
func isOwnVar(name string) bool { return strings.HasPrefix(name, "TOOLHOST_") }

// hostVars are the variables besides TOOLHOST_* that toolhost reads and an
// import could make (LABEL_KEY): OTEL_* for tracing, the HTTPS proxy, the
// OpenAI model's defaults.
var hostVars = []string{"HTTPS_PROXY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"}

// readByHost reports whether toolhost reads the variable name: one the
// import makes for a secret must not be, or the operator's export would set
// toolhost's own (a server labelled toolhost with env TOKEN would otherwise
// get TOOLHOST_TOKEN, the admin token).
func readByHost(name string) bool {
	return isOwnVar(name) || strings.HasPrefix(name, "OTEL_") || slices.Contains(hostVars, name)
}

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
			e.Args[i] = cutOwnVars(a)
			s.cutArgs = append(s.cutArgs, i)
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
