package mcpimport

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// stateful is a server that keeps its state in a file beside its code
// unless a variable of its environment names one elsewhere: in its sandbox
// its code is read-only (a server that could rewrite its code would run
// what an agent made it write), so its first write fails (EROFS) unless
// the block names a file in a directory it may write.
type stateful struct {
	name string // the server, in comments
	what string // what the file holds
	env  string // the variable naming the file
	file string // the file's name in the directory the import chooses
}

// statefulServers are the npm packages known to keep their state beside
// their code (their source, as installed, says so).
var statefulServers = map[string]stateful{
	// dist/index.js: memory.jsonl beside it unless MEMORY_FILE_PATH (a
	// relative one against that directory too); each save writes a
	// temporary file beside it and renames it.
	"@modelcontextprotocol/server-memory": {name: "server-memory", what: "its knowledge graph", env: "MEMORY_FILE_PATH", file: "memory.jsonl"},
}

// npmPackage is the npm package ("name" or "@scope/name") that the program
// at p (links followed) lies in, in a node_modules directory; "" for none.
func (m *machine) npmPackage(p string) string {
	real, err := m.realPath(p)
	if err != nil {
		return ""
	}
	i := strings.LastIndex(real, "/node_modules/")
	if i < 0 {
		return ""
	}
	parts := strings.SplitN(real[i+len("/node_modules/"):], "/", 3)
	if strings.HasPrefix(parts[0], "@") && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// fetched is the package a runner fetches: the first of args after its own
// that is not a flag, without a version ("@scope/name@1.2" is
// "@scope/name").
func fetched(r runner, args []string) string {
	for _, a := range args[len(r.sub):] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if i := strings.LastIndexByte(a, '@'); i > 0 {
			a = a[:i]
		}
		return a
	}
	return ""
}

// keepState gives a stateful server a file outside its code: the one its
// client's env names (absolute), else one the import chooses, in a
// directory of its own beside the config file (made now, for the probe
// and the first start): mcp-state/LABEL. The directory goes in read_write,
// unless the host would refuse it there. A comment says what the import
// could not decide.
func (im *importer) keepState(s *mcpServer, b *box, st stateful, trust *trustCheck) {
	m := im.machine
	var dir string
	if i := slices.IndexFunc(s.env, func(kv keyValue) bool { return kv.key == st.env }); i >= 0 {
		v := s.entry.Env[st.env]
		switch {
		case !known(s.env[i].val, v):
			b.notes = append(b.notes, fmt.Sprintf("%s keeps %s in the file %s names, which the client fills in:", st.name, st.what, st.env),
				"add its directory to read_write.")
			return
		case !path.IsAbs(v):
			b.notes = append(b.notes, fmt.Sprintf("%s %s is relative: %s resolves it against its own code's directory,", st.env, strconv.Quote(v), st.name),
				"read-only here: write an absolute path in a directory of its own, and add that directory to read_write.")
			return
		}
		dir = path.Dir(path.Clean(v))
		s.comments = append(s.comments, fmt.Sprintf("# %s keeps %s in %s (%s): its directory is read_write.", st.name, st.what, v, st.env))
	} else {
		dir = path.Join(path.Dir(m.config.File), "mcp-state", s.label)
		file := path.Join(dir, st.file)
		s.env = append(s.env, keyValue{st.env, value{{text: file}}})
		s.comments = append(s.comments,
			fmt.Sprintf("# %s keeps %s in a file beside its code, read-only in the sandbox,", st.name, st.what),
			fmt.Sprintf("# unless %s names one elsewhere. Where you want it the import cannot know: it chose", st.env),
			"# "+file+"; to move it, change env and read_write together.")
	}
	if _, err := m.stat(dir); err != nil {
		if m.mkdir == nil || m.mkdir(dir) != nil {
			s.comments = append(s.comments, "# Make its directory before the server starts: mkdir -p "+dir)
		} else {
			s.comments = append(s.comments, "# The import made its directory, "+dir+".")
		}
	}
	if why := trust.refuses(s.label, dir); why != "" {
		b.refused = append(b.refused, refusal{dir, why})
	} else if !slices.Contains(b.readWrite, dir) {
		b.readWrite = append(b.readWrite, dir)
	}
}
