package mcpimport

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/redact"
)

// importer turns entries into values, keeping every secret out of them.
type importer struct {
	file    string
	machine *machine        // where the servers will run
	names   map[string]bool // environment variables referenced, or to be exported
	secrets []export        // the variables made for secrets, in the order of the output
	refs    []string        // the variables the file refers to, in the order of the output
	notes   []string        // comments written above the blocks
}

// export is a variable made for a secret, which the operator sets for
// toolhost.
type export struct {
	name string
	from string // where its value is, in the file
}

// convert sets each server's values. References the file already holds
// keep their names; a secret gets a new variable, unique in the output.
func (im *importer) convert(servers []*mcpServer) {
	for _, s := range servers {
		e := &s.entry
		for _, v := range slices.Concat([]string{e.Command, e.URL}, slices.Collect(maps.Values(e.Env)), slices.Collect(maps.Values(e.Headers)), e.Args) {
			for _, p := range splitPlaceholders(v) {
				if p.env != "" {
					im.names[p.env] = true
				}
			}
		}
	}
	for _, s := range servers {
		e := &s.entry
		if e.URL != "" {
			s.url = im.value(s, site{attr: "url", name: "URL"}, e.URL)
			if strings.EqualFold(e.Type, "sse") {
				s.comments = append(s.comments, "# type \"sse\" in "+im.file+": toolhost speaks streamable HTTP only, so this server must offer it at this url")
			}
			for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
				s.headers = append(s.headers, keyValue{k, im.value(s, site{attr: "header", key: k, name: k, secretKey: secretKey(k)}, e.Headers[k])})
			}
		} else {
			s.command = im.value(s, site{attr: "command", name: "COMMAND"}, e.Command)
			for i, a := range e.Args {
				st := site{attr: "args", name: "ARG" + strconv.Itoa(i+1), index: i}
				if i > 0 && isFlag(e.Args[i-1]) {
					st.flag = e.Args[i-1]
					st.name = strings.TrimLeft(st.flag, "-")
				}
				s.args = append(s.args, im.value(s, st, a))
			}
			for _, k := range slices.Sorted(maps.Keys(e.Env)) {
				s.env = append(s.env, keyValue{k, im.value(s, site{attr: "env", key: k, name: k, secretKey: secretKey(k)}, e.Env[k])})
			}
		}
		if len(s.ignored) > 0 {
			s.comments = append(s.comments, "# not imported: "+quoteAll(s.ignored))
		}
	}
}

// quoteAll quotes each of ss, separated by commas.
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// site is where a value is in an entry.
type site struct {
	attr      string // command, args, env, url or header
	key       string // the env or header key
	index     int    // the position in args
	flag      string // the argument before this one, when it is a flag
	name      string // what a variable for the value is named after, with the label
	secretKey bool   // the key says the value is a secret
}

// where describes the site for the operator, without the value.
func (st site) where(s *mcpServer) string {
	w := strconv.Quote(s.name) + " " + st.attr
	switch st.attr {
	case "env", "header":
		w += " " + st.key
	case "args":
		w += "[" + strconv.Itoa(st.index) + "]"
	}
	return w
}

// secretWords mark a key (an env name, a header) whose value is a secret.
var secretWords = []string{"TOKEN", "KEY", "SECRET", "PASSWORD", "PASS", "AUTH", "CREDENTIAL", "COOKIE", "SESSION"}

// secretKey reports whether an env or header key names a secret.
func secretKey(k string) bool {
	k = strings.ToUpper(k)
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(k, w) })
}

// authSchemes may stand before a reference in a secret header's value:
// "Bearer ${env:TOKEN}" holds no secret itself.
var authSchemes = []string{"", "bearer", "basic", "token", "bot", "apikey"}

// flagRE matches a command-line flag, -f or --flag, with =value or not.
var flagRE = regexp.MustCompile(`^(--?[A-Za-z][A-Za-z0-9_.-]*)(=.*)?$`)

// isFlag reports whether s is a flag without a value, so that the next
// argument may be its value.
func isFlag(s string) bool { return flagRE.MatchString(s) && !strings.Contains(s, "=") }

// isSecret reports whether text, literal text of a value, would be redacted.
func isSecret(text string) bool {
	_, changed := redact.String(text)
	return changed
}

// value converts one string at st: client references to env() calls, and a
// secret to a new variable the operator exports.
func (im *importer) value(s *mcpServer, st site, raw string) value {
	parts := splitPlaceholders(raw)
	var literal []string
	refs := false
	for _, p := range parts {
		if p.env != "" {
			refs = true
		} else {
			literal = append(literal, p.text)
		}
	}
	text := strings.Join(literal, " ")
	// The redactor keeps a ${…} as a reference: what is inside is checked
	// on its own.
	secret := isSecret(text) || slices.ContainsFunc(placeholderRE.FindAllStringSubmatch(raw, -1), func(m []string) bool { return isSecret(m[1]) })
	switch {
	case st.secretKey && refs:
		secret = secret || !slices.Contains(authSchemes, strings.ToLower(strings.TrimSpace(text)))
	case st.secretKey:
		secret = secret || raw != ""
	case st.flag != "":
		secret = secret || isSecret(st.flag+"="+text)
	}
	if !secret {
		for _, p := range parts {
			if p.env != "" && !slices.Contains(im.refs, p.env) {
				im.refs = append(im.refs, p.env)
			}
			if p.env == "" && hasPlaceholder(p.text) {
				s.comments = append(s.comments, fmt.Sprintf("# %s holds %s, which the client would expand and toolhost does not: set what it stands for", st.where(s), quoteAll(clientVars(p.text))))
			}
		}
		return parts
	}
	// The file's value still holds the reference cut from it: an export
	// of it, copied into a shell, would expand to toolhost's own.
	if st.attr == "args" && slices.Contains(s.cutArgs, st.index) {
		s.comments = append(s.comments, fmt.Sprintf("# %s is left empty: a secret beside a reference to toolhost's own variables in %s, never exported from there", st.where(s), im.file))
		return value{{}}
	}
	// --token=SECRET keeps its flag.
	var prefix value
	from := "the value of " + st.where(s) + " in " + im.file
	if m := flagRE.FindStringSubmatch(raw); st.attr == "args" && m != nil && m[2] != "" && !isSecret(m[1]) {
		prefix = value{{text: m[1] + "="}}
		st.name = strings.TrimLeft(m[1], "-")
		from += ", after " + m[1] + "="
		raw = m[2][1:]
	}
	name := im.newName(s.label, st.name)
	if vars := clientVars(raw); len(vars) > 0 {
		from += ", with " + quoteAll(vars) + " as the client fills it in"
	}
	if refs {
		from += ", with its ${…} references expanded"
	}
	im.secrets = append(im.secrets, export{name: name, from: from})
	return append(prefix, part{env: name})
}

// newName returns a variable name LABEL_KEY, upper case with every
// character but letters and digits as _, unique in the output: MCP_ before
// it when toolhost reads that name (readByHost).
func (im *importer) newName(label, key string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(label + "_" + key) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	base := b.String()
	if readByHost(base) {
		base = "MCP_" + base
	}
	name := base
	for n := 2; im.names[name]; n++ {
		name = base + "_" + strconv.Itoa(n)
	}
	im.names[name] = true
	return name
}

// placeholderRE matches what a client expands in a value: ${env:NAME},
// ${NAME}, ${workspaceFolder}, ${input:id}…
var placeholderRE = regexp.MustCompile(`\$\{([^{}]*)\}`)

// editorVars are the ${NAME} variables of VS Code and Cursor that are not
// environment variables.
var editorVars = []string{"workspaceFolder", "workspaceFolderBasename", "workspaceRoot", "userHome", "cwd",
	"pathSeparator", "execPath", "file", "fileBasename", "fileBasenameNoExtension", "fileDirname", "fileExtname",
	"fileWorkspaceFolder", "relativeFile", "relativeFileDirname", "lineNumber", "selectedText"}

// envRef returns the variable a placeholder's inside (NAME or env:NAME)
// refers to, or "" when it is not an environment variable (or looks like a
// secret, never to be written as a name).
func envRef(inside string) string {
	name, isEnv := strings.CutPrefix(inside, "env:")
	if !envNameRE.MatchString(name) || !isEnv && slices.Contains(editorVars, name) || isSecret(name) {
		return ""
	}
	return name
}

// splitPlaceholders splits s into literal text and references to
// environment variables; other placeholders stay in the text.
func splitPlaceholders(s string) value {
	var v value
	last := 0
	for _, m := range placeholderRE.FindAllStringSubmatchIndex(s, -1) {
		name := envRef(s[m[2]:m[3]])
		if name == "" {
			continue
		}
		if m[0] > last {
			v = append(v, part{text: s[last:m[0]]})
		}
		v = append(v, part{env: name})
		last = m[1]
	}
	if last < len(s) || len(v) == 0 {
		v = append(v, part{text: s[last:]})
	}
	return v
}

// hasPlaceholder reports whether s holds a ${…} a client expands.
func hasPlaceholder(s string) bool { return placeholderRE.MatchString(s) }

// clientVars lists the placeholders in s that are not environment
// variables, leaving out any that looks like a secret.
func clientVars(s string) []string {
	var vars []string
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		if envRef(m[1]) == "" && !isSecret(m[1]) {
			vars = append(vars, m[0])
		}
	}
	return vars
}
