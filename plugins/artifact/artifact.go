// Package artifact is the artifact group: put_artifact stores text or a
// workspace file and returns an id, get_artifact reads one back. Artifacts
// are blobs under data_dir (or in the database), indexed in the store,
// private to the host (directories 0700, files 0600). An artifact belongs
// to the role that stored it: that role reads it, and the roles it shares
// it with (put_artifact's share, spawn_agent_with_task's artifacts through
// [HandOver]); to any other its id names nothing.
//
// The group runs in-process, registered by the agent runtime
// ([github.com/toolhost/toolhost/agents]) under its reserved id, which
// serves it as a [Service].
package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

type putArtifactArgs struct {
	Name    string   `json:"name,omitempty" jsonschema:"a file name for the artifact"`
	Content string   `json:"content,omitempty" jsonschema:"the artifact's text; give content or path"`
	Path    string   `json:"path,omitempty" jsonschema:"a file in the workspace to store; give content or path"`
	MIME    string   `json:"mime,omitempty" jsonschema:"the media type; default guessed from the name and the bytes"`
	Share   []string `json:"share,omitempty" jsonschema:"roles (names or ids) that may read it too; by default your role alone may"`
}

type getArtifactArgs struct {
	ID string `json:"id" jsonschema:"the artifact's id, as put_artifact returned it"`
}

// maxArtifact bounds an artifact's size.
const maxArtifact = 64 << 20

// maxShare bounds the roles put_artifact shares an artifact with, and the
// artifacts spawn_agent_with_task hands over.
const maxShare = 16

// Service is what the artifact group needs from the agent runtime: the
// roles, the artifacts' store, and where put_artifact may read files.
type Service interface {
	// RoleNamed finds a role by its name.
	RoleNamed(name string) (store.Role, error)
	// Role finds a role by its name or id.
	Role(nameOrID string) (store.Role, error)
	// Put keeps an artifact's bytes as a new artifact with a new random id,
	// as [github.com/toolhost/toolhost/host.Artifacts.Put] does.
	Put(ctx context.Context, a store.Artifact, data []byte) (store.Artifact, error)
	// Artifact returns the artifact id if the role with the id reader may
	// read it, as [store.Store.Artifact] does.
	Artifact(ctx context.Context, id, reader string) (store.Artifact, error)
	// Data returns the bytes of the artifact id, which the role with the id
	// reader may read.
	Data(ctx context.Context, id, reader string) ([]byte, error)
	// Evicted returns when a quota evicted the artifact id that the role
	// with the id reader could read, as [store.Store.Evicted] does.
	Evicted(ctx context.Context, id, reader string) (time.Time, error)
	// Share lets the roles with the ids roles read the artifacts ids, which
	// the role with the id owner stored, as [store.Store.ShareArtifacts]
	// does.
	Share(ctx context.Context, owner string, ids, roles []string) error
	// Workspace is the directory put_artifact reads a path in.
	Workspace() string
	// DataDir is the host's data directory, which no path may lead into.
	DataDir() string
}

// Group returns the artifact group, storing and reading artifacts through
// svc.
func Group(svc Service) *sdk.Group {
	return &sdk.Group{ID: "artifact", Description: "Artifacts: store text or a workspace file and get an id to hand to other agents; read one back by id.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("put_artifact", "Store text (content) or a workspace file (path) as an artifact; returns its id. Your role reads it, and the roles named in share.",
			func(ctx context.Context, r *sdk.Request[putArtifactArgs]) (store.Artifact, error) {
				return put(ctx, svc, r.Call, r.Args)
			}, sdk.Title("Store artifact"), sdk.Additive()),
		sdk.NewTool("get_artifact", "Read an artifact by id, one your role stored or was handed: text is returned as is, other bytes as an attachment.",
			func(ctx context.Context, r *sdk.Request[getArtifactArgs]) (*sdk.Result, error) {
				return get(ctx, svc, r.Call, r.Args.ID)
			}, sdk.Title("Read artifact"), sdk.ReadOnly()),
	}}
}

// callerRoleID is the id of the role of a call's caller, which owns the
// artifacts it stores: "" for the operator (a call without a role).
func callerRoleID(svc Service, by toolhost.CallContext) (string, error) {
	if by.Role == "" {
		return "", nil
	}
	r, err := svc.RoleNamed(by.Role)
	return r.ID, err
}

// noArtifact is the error of reading, or handing over, an id that names no
// artifact the caller's role may: the same whether it names another role's
// artifact or nothing, so that it confirms nothing.
func noArtifact(id string) error {
	return toolhost.Errorf(toolhost.CodeValidation, "no artifact %s: an artifact is read by the role that stored it and the roles it was handed to", id)
}

// checkArtifactID refuses what cannot be an artifact's id.
func checkArtifactID(id string) error {
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return toolhost.Errorf(toolhost.CodeValidation, "field id: %q is not an artifact id (64 lower-case hex digits)", id)
	}
	return nil
}

func put(ctx context.Context, svc Service, by toolhost.CallContext, args putArtifactArgs) (store.Artifact, error) {
	var data []byte
	switch {
	case (args.Content == "") == (args.Path == ""):
		return store.Artifact{}, toolhost.Errorf(toolhost.CodeValidation, "give exactly one of content and path")
	case args.Path != "":
		var err error
		if data, err = readWorkspace(svc, args.Path); err != nil {
			return store.Artifact{}, err
		}
		if args.Name == "" {
			args.Name = filepath.Base(args.Path)
		}
	default:
		data = []byte(args.Content)
	}
	if len(data) > maxArtifact {
		return store.Artifact{}, toolhost.Errorf(toolhost.CodeValidation, "artifact is %d bytes, more than the %d allowed", len(data), maxArtifact)
	}
	if len(args.Share) > maxShare {
		return store.Artifact{}, toolhost.Errorf(toolhost.CodeValidation, "field share: %d roles, more than %d", len(args.Share), maxShare)
	}
	owner, err := callerRoleID(svc, by)
	if err != nil {
		return store.Artifact{}, err
	}
	share := make([]string, len(args.Share))
	for i, name := range args.Share {
		r, err := svc.Role(name)
		if err != nil {
			return store.Artifact{}, toolhost.Errorf(toolhost.CodeValidation, "field share: %w", err)
		}
		share[i] = r.ID
	}
	if args.MIME == "" {
		args.MIME = mime.TypeByExtension(filepath.Ext(args.Name))
	}
	if args.MIME == "" {
		args.MIME = http.DetectContentType(data)
	}
	a, err := svc.Put(ctx, store.Artifact{Name: args.Name, MIME: args.MIME, CreatedBy: by.AgentID, Role: by.Role, RoleID: owner}, data)
	if err != nil || len(share) == 0 {
		return a, err
	}
	if err := svc.Share(ctx, owner, []string{a.ID}, share); err != nil {
		return a, toolhost.Errorf(toolhost.CodeInternal, "artifact %s stored, not shared: %w", a.ID, err)
	}
	return a, nil
}

// HandOver shares the artifacts ids, which the role of the caller by must
// have stored, with role, that of an agent it spawns, and returns the
// agent's task with a line naming them: spawn_agent_with_task's artifacts.
func HandOver(ctx context.Context, svc Service, by toolhost.CallContext, role store.Role, task string, ids []string) (string, error) {
	if len(ids) > maxShare {
		return "", toolhost.Errorf(toolhost.CodeValidation, "field artifacts: %d ids, more than %d", len(ids), maxShare)
	}
	owner, err := callerRoleID(svc, by)
	if err != nil {
		return "", err
	}
	named := make([]string, len(ids))
	for i, id := range ids {
		if err := checkArtifactID(id); err != nil {
			return "", err
		}
		a, err := svc.Artifact(ctx, id, owner)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return "", noArtifact(id)
		case err != nil:
			return "", toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
		case a.RoleID != owner:
			return "", toolhost.Errorf(toolhost.CodePolicy, "artifact %s was handed to your role: only the role that stored it may hand it on", id)
		}
		named[i] = fmt.Sprintf("%s (%s, %d bytes)", id, a.Name, a.Size)
	}
	if err := svc.Share(ctx, owner, ids, []string{role.ID}); errors.Is(err, store.ErrNotFound) {
		return "", toolhost.Errorf(toolhost.CodeValidation, "artifacts not handed over, one was evicted meanwhile: %v", err)
	} else if err != nil {
		return "", toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
	}
	return task + "\n\nArtifacts handed to you (read them with get_artifact): " + strings.Join(named, ", "), nil
}

// readWorkspace reads a file inside svc's workspace; the path may not
// leave it, symlinks included ([os.Root]), nor lead into the host's data
// directory (which the host refuses to put in a workspace, a second layer):
// the file opened is placed by the kernel ([sdk.HostPaths.Check]), not by
// its path.
func readWorkspace(svc Service, path string) ([]byte, error) {
	workspace := svc.Workspace()
	hidden, err := sdk.ResolveHostPaths([]string{svc.DataDir()})
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "artifact: workspace: %v", err)
	}
	defer root.Close()
	rel := path
	if filepath.IsAbs(path) {
		if rel, err = filepath.Rel(workspace, path); err != nil || strings.HasPrefix(rel, "..") {
			return nil, toolhost.Errorf(toolhost.CodePolicy, "path %s is outside the workspace %s", path, workspace)
		}
	}
	f, err := root.Open(rel)
	if err != nil {
		if strings.Contains(err.Error(), "escapes") {
			return nil, toolhost.Errorf(toolhost.CodePolicy, "path %s is outside the workspace %s", path, workspace)
		}
		return nil, toolhost.Errorf(toolhost.CodeValidation, "field path: %v", err)
	}
	defer f.Close()
	if _, err := hidden.Check(f); errors.Is(err, sdk.ErrHostPath) {
		return nil, sdk.HostPathRefused(path)
	} else if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "artifact: %v", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxArtifact+1))
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "artifact: %v", err)
	}
	return data, nil
}

func get(ctx context.Context, svc Service, by toolhost.CallContext, id string) (*sdk.Result, error) {
	if err := checkArtifactID(id); err != nil {
		return nil, err
	}
	reader, err := callerRoleID(svc, by)
	if err != nil {
		return nil, err
	}
	a, err := svc.Artifact(ctx, id, reader)
	if errors.Is(err, store.ErrNotFound) {
		if at, err := svc.Evicted(ctx, id, reader); err == nil {
			return nil, toolhost.Errorf(toolhost.CodeValidation, "artifact %s was evicted at %s to keep within the storage quotas (store { quota, role_quota }): put it again", id, at.Format(time.RFC3339))
		}
		return nil, noArtifact(id)
	}
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
	}
	data, err := svc.Data(ctx, id, reader)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "artifact %s: %v", id, err)
	}
	meta := map[string]any{"id": a.ID, "name": a.Name, "mime": a.MIME, "size": a.Size, "createdBy": a.CreatedBy}
	if utf8.Valid(data) && !strings.ContainsRune(string(data), 0) {
		return &sdk.Result{OK: true, Stdout: string(data), Meta: meta}, nil
	}
	return &sdk.Result{OK: true, Stdout: fmt.Sprintf("binary artifact %s (%s, %d bytes), attached", a.Name, a.MIME, a.Size), Meta: meta,
		Attachments: []toolhost.Attachment{{Name: a.Name, MimeType: a.MIME, Data: data}}}, nil
}
