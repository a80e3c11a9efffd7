package host

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
)

// pin is a module's executable as its first launch found it.
type pin struct {
	path     string // the file, absolute
	sha256   string // its digest, hex; "" before the first launch
	launches int    // how many launches verify has passed
}

// verify makes sure the block's module runs only as it was when the host
// started it: the first launch records the SHA-256 of its executable (a
// plugin's, or an mcp_server command's file, looked up in PATH if need
// be), and every restart refuses, with policy, an executable that differs,
// so that a binary replaced while the host runs is never started, least of
// all unconfined. A block's own sha256 is checked by go-plugin as before.
// An HTTP mcp_server has no executable.
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
	sum, err := fileSHA256(path)
	if err != nil {
		return nil // the start says what is wrong with it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.pinned.sha256 == "":
		s.pinned = pin{path: path, sha256: sum}
	case path != s.pinned.path:
		return toolhost.Errorf(toolhost.CodePolicy, "%s %q: its command is now %s, not %s as when the host started it: refused (restart the host to trust it)", s.cfg.Kind, s.cfg.Name, path, s.pinned.path)
	case sum != s.pinned.sha256:
		return toolhost.Errorf(toolhost.CodePolicy, "%s %q: the executable %s changed since the host started it (sha256 %.12s…, now %.12s…): refused, the group stays down (restart the host to trust the new binary)", s.cfg.Kind, s.cfg.Name, path, s.pinned.sha256, sum)
	}
	s.pinned.launches++
	return nil
}

// pinnedSHA256 is the digest a plugin process must have, which go-plugin
// checks once more as it starts it: the block's own, else, on a restart,
// the one the first launch recorded (the first launch has just hashed the
// file it records).
func (s *supervisor) pinnedSHA256() string {
	if s.cfg.SHA256 != "" {
		return s.cfg.SHA256
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pinned.launches < 2 {
		return ""
	}
	return s.pinned.sha256
}

// fileSHA256 is the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
