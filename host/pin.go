package host

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
)

// pin is a module's executable as its first launch found it: the file's
// identity, which any change to it changes (another file renamed over it
// has another inode; a write sets its change time, which no caller can
// set back).
type pin struct {
	path string // the file, absolute
	id   fileID // zero before the first launch
}

// fileID identifies a file's content without reading it.
type fileID struct {
	dev, ino, size   uint64
	mtimeNs, ctimeNs int64
}

// verify makes sure the block's module runs only as it was when the host
// started it: the first launch records the identity of its executable (a
// plugin's, or an mcp_server command's file, looked up in PATH if need
// be), and every restart refuses, with policy, an executable that differs,
// so that a binary replaced or rewritten while the host runs is never
// started, least of all unconfined. Comparing identities costs a stat, not
// a read of the file at every start; a block's own sha256 pins the content
// across host restarts too (go-plugin checks it). An HTTP mcp_server has no
// executable.
func (s *supervisor) verify() error {
	path := s.cfg.Path
	if s.cfg.Kind == config.KindMCP {
		if s.cfg.URL != "" {
			return nil
		}
		if !strings.Contains(path, "/") {
			found, err := exec.LookPath(path)
			if err != nil {
				return nil // the start says it is missing
			}
			path = found
		}
	}
	id, err := identify(path)
	if err != nil {
		return nil // the start says what is wrong with it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.pinned.id == fileID{}:
		s.pinned = pin{path: path, id: id}
	case path != s.pinned.path:
		return toolhost.Errorf(toolhost.CodePolicy, "%s %q: its command is now %s, not %s as when the host started it: refused (restart the host to trust it)", s.cfg.Kind, s.cfg.Name, path, s.pinned.path)
	case id != s.pinned.id:
		return toolhost.Errorf(toolhost.CodePolicy, "%s %q: the executable %s changed since the host started it (%s): refused, the group stays down (restart the host to trust the new binary)", s.cfg.Kind, s.cfg.Name, path, s.pinned.id.diff(id))
	}
	return nil
}

// identify returns the identity of the file at path, links followed.
func identify(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, fmt.Errorf("%s: no file identity", path)
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mtimeNs: st.Mtim.Nano(), ctimeNs: st.Ctim.Nano()}, nil
}

// diff says how b differs from a.
func (a fileID) diff(b fileID) string {
	switch {
	case a.dev != b.dev || a.ino != b.ino:
		return "another file in its place"
	case a.size != b.size:
		return fmt.Sprintf("%d bytes, not %d", b.size, a.size)
	default:
		return "rewritten"
	}
}
