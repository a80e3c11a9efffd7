package artifact_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/plugins/artifact"
	"github.com/toolhost/toolhost/store"
)

// service keeps artifacts in memory, readable by the role that stored them
// and those they were shared with, over a workspace and a data directory
// on disk.
type service struct {
	ws, data string
	roles    []store.Role
	arts     map[string]*kept
	evicted  map[string]time.Time
	dataErr  error
	shares   [][]string // each Share's ids, then its roles
}

type kept struct {
	a       store.Artifact
	data    []byte
	readers []string
}

func newService(t *testing.T) *service {
	return &service{ws: t.TempDir(), data: t.TempDir(), arts: map[string]*kept{}, evicted: map[string]time.Time{},
		roles: []store.Role{{ID: "role_a", Name: "author"}, {ID: "role_r", Name: "reviewer"}}}
}

func (s *service) RoleNamed(name string) (store.Role, error) {
	for _, r := range s.roles {
		if r.Name == name {
			return r, nil
		}
	}
	return store.Role{}, toolhost.Errorf(toolhost.CodeValidation, "no role named %q", name)
}

func (s *service) Role(nameOrID string) (store.Role, error) {
	for _, r := range s.roles {
		if r.ID == nameOrID {
			return r, nil
		}
	}
	return s.RoleNamed(nameOrID)
}

func (s *service) Put(_ context.Context, a store.Artifact, data []byte) (store.Artifact, error) {
	a.ID, a.Size = fmt.Sprintf("%064x", len(s.arts)+1), int64(len(data))
	s.arts[a.ID] = &kept{a: a, data: data, readers: []string{a.RoleID}}
	return a, nil
}

func (s *service) readable(id, reader string) (*kept, error) {
	if k := s.arts[id]; k != nil && slices.Contains(k.readers, reader) {
		return k, nil
	}
	return nil, fmt.Errorf("artifact %s: %w", id, store.ErrNotFound)
}

func (s *service) Artifact(_ context.Context, id, reader string) (store.Artifact, error) {
	k, err := s.readable(id, reader)
	if err != nil {
		return store.Artifact{}, err
	}
	return k.a, nil
}

func (s *service) Data(_ context.Context, id, reader string) ([]byte, error) {
	k, err := s.readable(id, reader)
	if err != nil {
		return nil, err
	}
	return k.data, s.dataErr
}

func (s *service) Evicted(_ context.Context, id, _ string) (time.Time, error) {
	if at, ok := s.evicted[id]; ok {
		return at, nil
	}
	return time.Time{}, store.ErrNotFound
}

func (s *service) Share(_ context.Context, owner string, ids, roles []string) error {
	for _, id := range ids {
		if k := s.arts[id]; k == nil || k.a.RoleID != owner {
			return fmt.Errorf("artifact %s: %w", id, store.ErrNotFound)
		}
	}
	for _, id := range ids {
		s.arts[id].readers = append(s.arts[id].readers, roles...)
	}
	s.shares = append(s.shares, ids, roles)
	return nil
}

func (s *service) Workspace() string { return s.ws }
func (s *service) DataDir() string   { return s.data }

// author and reviewer call as agents of those roles; the operator has none.
var (
	author   = toolhost.CallContext{AgentID: "agent_a", Role: "author"}
	reviewer = toolhost.CallContext{AgentID: "agent_r", Role: "reviewer"}
	operator = toolhost.CallContext{}
)

func (s *service) call(t *testing.T, by toolhost.CallContext, tool string, args any) *toolhost.Result {
	t.Helper()
	b, _ := json.Marshal(args)
	res, err := artifact.Group(s).Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: b, Context: by})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// put stores an artifact as by and returns what put_artifact answered.
func (s *service) put(t *testing.T, by toolhost.CallContext, args map[string]any) store.Artifact {
	t.Helper()
	res := s.call(t, by, "put_artifact", args)
	var a store.Artifact
	if !res.OK || json.Unmarshal([]byte(res.Stdout), &a) != nil {
		t.Fatalf("put_artifact %v: %+v", args, res)
	}
	return a
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPutAndGet(t *testing.T) {
	s := newService(t)
	write(t, filepath.Join(s.ws, "report.md"), []byte("# Report\n"))
	write(t, filepath.Join(s.ws, "pixel.bin"), []byte{0x89, 'P', 'N', 'G', 0, 1, 2})

	text := s.put(t, author, map[string]any{"name": "note.txt", "content": "hello"})
	if text.Name != "note.txt" || text.Size != 5 || !strings.HasPrefix(text.MIME, "text/plain") || text.CreatedBy != "agent_a" || text.Role != "author" || s.arts[text.ID].a.RoleID != "role_a" {
		t.Errorf("text artifact: %+v", text)
	}
	if file := s.put(t, author, map[string]any{"path": "report.md"}); file.Name != "report.md" || file.Size != 9 || string(s.arts[file.ID].data) != "# Report\n" {
		t.Errorf("file artifact: %+v", file)
	}
	bin := s.put(t, author, map[string]any{"path": filepath.Join(s.ws, "pixel.bin"), "mime": "image/png"})
	if bin.Name != "pixel.bin" || bin.MIME != "image/png" {
		t.Errorf("binary artifact: %+v", bin)
	}
	if sniffed := s.put(t, operator, map[string]any{"content": "<html><body>hi</body></html>"}); !strings.HasPrefix(sniffed.MIME, "text/html") || s.arts[sniffed.ID].a.RoleID != "" {
		t.Errorf("an artifact of the operator, its type sniffed: %+v", sniffed)
	}

	res := s.call(t, author, "get_artifact", map[string]string{"id": text.ID})
	if !res.OK || res.Stdout != "hello" || res.Meta["name"] != "note.txt" || res.Meta["createdBy"] != "agent_a" || len(res.Attachments) != 0 {
		t.Errorf("get text: %+v", res)
	}
	res = s.call(t, author, "get_artifact", map[string]string{"id": bin.ID})
	if !res.OK || len(res.Attachments) != 1 || res.Attachments[0].MimeType != "image/png" || len(res.Attachments[0].Data) != 7 ||
		res.Stdout != "binary artifact pixel.bin (image/png, 7 bytes), attached" {
		t.Errorf("get binary: %+v", res)
	}
	s.dataErr = errors.New("gone from disk")
	if res := s.call(t, author, "get_artifact", map[string]string{"id": text.ID}); res.OK || res.Error.Code != toolhost.CodeToolExec {
		t.Errorf("get when the bytes cannot be read: %+v", res)
	}
}

// TestPutArtifactRefusals: what put_artifact refuses stores nothing.
func TestPutArtifactRefusals(t *testing.T) {
	s := newService(t)
	write(t, filepath.Join(s.ws, "report.md"), []byte("# Report\n"))
	outside := filepath.Join(t.TempDir(), "secret.txt")
	write(t, outside, []byte("secret"))
	if err := os.Symlink(outside, filepath.Join(s.ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args map[string]any
		code toolhost.Code
		msg  string
	}{
		{map[string]any{"content": "x", "path": "report.md"}, toolhost.CodeValidation, "exactly one of content and path"},
		{map[string]any{}, toolhost.CodeValidation, "exactly one of content and path"},
		{map[string]any{"path": "../secret.txt"}, toolhost.CodePolicy, "outside the workspace"},
		{map[string]any{"path": "link.txt"}, toolhost.CodePolicy, "outside the workspace"},
		{map[string]any{"path": outside}, toolhost.CodePolicy, "outside the workspace"},
		{map[string]any{"path": "missing.txt"}, toolhost.CodeValidation, "no such file"},
		{map[string]any{"content": "x", "share": []string{"nobody"}}, toolhost.CodeValidation, `field share: no role named "nobody"`},
		{map[string]any{"content": "x", "share": make([]string, 17)}, toolhost.CodeValidation, "field share: 17 roles, more than 16"},
	} {
		res := s.call(t, author, "put_artifact", tt.args)
		if res.OK || res.Error.Code != tt.code || !strings.Contains(res.Error.Message, tt.msg) {
			t.Errorf("put_artifact %v: %+v, want %s %q", tt.args, res, tt.code, tt.msg)
		}
	}
	if len(s.arts) != 0 {
		t.Errorf("refused puts stored %d artifacts", len(s.arts))
	}
}

// TestArtifactRefusesDataDir: put_artifact {path} reads a workspace file;
// a workspace that holds the data directory is refused at start, but links
// in it may still lead there (an agent's command can make them), and the
// data directory's own path is absolute: each row must be refused without
// storing an artifact, and the admin token must stay as it was. Links out
// are refused as leaving the workspace; should the data directory be in
// the workspace all the same, the file opened is refused for where it is.
func TestArtifactRefusesDataDir(t *testing.T) {
	for _, inside := range []bool{false, true} {
		s := newService(t)
		if inside {
			s.data = filepath.Join(s.ws, "data")
			if err := os.Mkdir(s.data, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		token := filepath.Join(s.data, "admin.token")
		const secret = "th_admin_SECRET"
		if err := os.WriteFile(token, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(s.data, "toolhost.db"), []byte("SQLite format 3"))
		links := map[string]string{"d": s.data, "t": token, "data": s.data}
		if inside { // links that stay in the workspace
			links = map[string]string{"d": "data", "t": "data/admin.token"}
		}
		for name, target := range links {
			if err := os.Symlink(target, filepath.Join(s.ws, name)); err != nil {
				t.Fatal(err)
			}
		}
		for _, path := range []string{
			"data/admin.token",
			"./data/../data/admin.token",
			token,
			"d/admin.token",
			"t",
			"data/toolhost.db",
			"data",
		} {
			t.Run(fmt.Sprintf("inside=%v/%s", inside, path), func(t *testing.T) {
				res := s.call(t, operator, "put_artifact", map[string]any{"path": path})
				if res.OK {
					t.Fatalf("put_artifact %s stored %s", path, res.Stdout)
				}
				refused, outside := strings.Contains(res.Error.Message, "is in the host's data directory: refused"), strings.Contains(res.Error.Message, "is outside the workspace")
				if res.Error.Code != toolhost.CodePolicy || !refused && (inside || !outside) {
					t.Errorf("put_artifact %s (data directory in the workspace: %v): %+v, want policy", path, inside, res.Error)
				}
				if b, err := os.ReadFile(token); err != nil || string(b) != secret {
					t.Errorf("the token changed: %q, %v", b, err)
				}
				if info, err := os.Stat(token); err != nil || info.Mode() != 0o600 {
					t.Errorf("the token's mode: %v, %v", info, err)
				}
				if len(s.arts) != 0 {
					t.Errorf("an artifact was stored: %+v", s.arts)
				}
			})
		}
	}
}

// TestGetArtifactRefusals: an id that is none, names nothing the caller's
// role may read, or names an evicted artifact.
func TestGetArtifactRefusals(t *testing.T) {
	s := newService(t)
	mine := s.put(t, author, map[string]any{"content": "the author's"})
	gone := strings.Repeat("e", 64)
	s.evicted[gone] = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		by      toolhost.CallContext
		id, msg string
	}{
		{author, "nope", `field id: "nope" is not an artifact id (64 lower-case hex digits)`},
		{author, strings.Repeat("A", 64), "is not an artifact id"},
		{author, strings.Repeat("0", 64), "no artifact " + strings.Repeat("0", 64) + ": an artifact is read by the role that stored it and the roles it was handed to"},
		{reviewer, mine.ID, "no artifact " + mine.ID + ": an artifact is read by the role that stored it"},
		{operator, mine.ID, "no artifact " + mine.ID + ": "},
		{author, gone, "artifact " + gone + " was evicted at 2030-01-02T03:04:05Z to keep within the storage quotas (store { quota, role_quota }): put it again"},
	} {
		res := s.call(t, tt.by, "get_artifact", map[string]string{"id": tt.id})
		if res.OK || res.Error.Code != toolhost.CodeValidation || !strings.Contains(res.Error.Message, tt.msg) {
			t.Errorf("%s gets %s: %+v, want %q", tt.by.Role, tt.id, res, tt.msg)
		}
	}
}

func TestShareAndHandOver(t *testing.T) {
	s := newService(t)
	mine := s.put(t, author, map[string]any{"content": "for the reviewer", "share": []string{"reviewer"}})
	if len(s.shares) != 2 || !slices.Equal(s.shares[0], []string{mine.ID}) || !slices.Equal(s.shares[1], []string{"role_r"}) {
		t.Fatalf("put_artifact's share: %v", s.shares)
	}
	if res := s.call(t, reviewer, "get_artifact", map[string]string{"id": mine.ID}); !res.OK || res.Stdout != "for the reviewer" {
		t.Errorf("the reviewer reads what was shared with it: %+v", res)
	}

	private := s.put(t, author, map[string]any{"content": "the author's"})
	reviewerRole, _ := s.Role("reviewer")
	task, err := artifact.HandOver(context.Background(), s, author, reviewerRole, "review it", []string{private.ID})
	if want := "review it\n\nArtifacts handed to you (read them with get_artifact): " + private.ID + " (, 12 bytes)"; err != nil || task != want {
		t.Errorf("hand-over: %q, %v; want %q", task, err, want)
	}
	if res := s.call(t, reviewer, "get_artifact", map[string]string{"id": private.ID}); !res.OK {
		t.Errorf("the reviewer reads what was handed to it: %+v", res)
	}

	authorRole, _ := s.Role("author")
	for _, tt := range []struct {
		by   toolhost.CallContext
		ids  []string
		code toolhost.Code
		msg  string
	}{
		{reviewer, []string{mine.ID}, toolhost.CodePolicy, "was handed to your role: only the role that stored it may hand it on"},
		{reviewer, []string{"nope"}, toolhost.CodeValidation, "is not an artifact id"},
		{reviewer, []string{strings.Repeat("0", 64)}, toolhost.CodeValidation, "no artifact"},
		{author, make([]string, 17), toolhost.CodeValidation, "field artifacts: 17 ids, more than 16"},
	} {
		if _, err := artifact.HandOver(context.Background(), s, tt.by, authorRole, "t", tt.ids); toolhost.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s hands over %v: %v, want %s %q", tt.by.Role, tt.ids, err, tt.code, tt.msg)
		}
	}
}
