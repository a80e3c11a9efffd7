package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	Name    string `json:"name,omitempty" jsonschema:"a file name for the artifact"`
	Content string `json:"content,omitempty" jsonschema:"the artifact's text; give content or path"`
	Path    string `json:"path,omitempty" jsonschema:"a file in the workspace to store; give content or path"`
	MIME    string `json:"mime,omitempty" jsonschema:"the media type; default guessed from the name and the bytes"`
}

type getArtifactArgs struct {
	ID string `json:"id" jsonschema:"the artifact's id, as put_artifact returned it"`
}

// maxArtifact bounds an artifact's size.
const maxArtifact = 64 << 20

// artifactGroup is artifact: content-addressed blobs under data_dir, indexed
// in the store, private to the host (directories 0700, files 0600).
func (rt *Runtime) artifactGroup() *sdk.Group {
	return &sdk.Group{ID: "artifact", Description: "Artifacts: store text or a workspace file and get an id to hand to other agents; read one back by id.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("put_artifact", "Store text (content) or a workspace file (path) as an artifact; returns its id, the SHA-256 of its bytes.",
			func(ctx context.Context, r *sdk.Request[putArtifactArgs]) (store.Artifact, error) {
				return rt.putArtifact(ctx, r.Call, r.Args)
			}, sdk.Title("Store artifact"), sdk.Additive()),
		sdk.NewTool("get_artifact", "Read an artifact by id: text is returned as is, other bytes as an attachment.",
			func(ctx context.Context, r *sdk.Request[getArtifactArgs]) (*sdk.Result, error) {
				return rt.getArtifact(ctx, r.Args.ID)
			}, sdk.Title("Read artifact"), sdk.ReadOnly()),
	}}
}

func (rt *Runtime) putArtifact(ctx context.Context, by toolhost.CallContext, args putArtifactArgs) (store.Artifact, error) {
	var data []byte
	switch {
	case (args.Content == "") == (args.Path == ""):
		return store.Artifact{}, toolhost.Errorf(toolhost.CodeValidation, "give exactly one of content and path")
	case args.Path != "":
		var err error
		if data, err = rt.readWorkspace(args.Path); err != nil {
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
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:])
	if args.MIME == "" {
		args.MIME = mime.TypeByExtension(filepath.Ext(args.Name))
	}
	if args.MIME == "" {
		args.MIME = http.DetectContentType(data)
	}
	return rt.h.PutArtifact(ctx, store.Artifact{ID: id, Name: args.Name, MIME: args.MIME, Size: int64(len(data)), CreatedBy: by.AgentID, Role: by.Role}, data)
}

// readWorkspace reads a file inside the runtime's workspace; the path may
// not leave it, symlinks included (os.Root), nor lead into the host's data
// directory (which the host refuses to put in a workspace, a second layer):
// the file opened is placed by the kernel (sdk.HostPaths.Check), not by its
// path.
func (rt *Runtime) readWorkspace(path string) ([]byte, error) {
	hidden, err := sdk.ResolveHostPaths([]string{rt.h.DataDir()})
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
	}
	root, err := os.OpenRoot(rt.cfg.Workspace)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "artifact: workspace: %v", err)
	}
	defer root.Close()
	rel := path
	if filepath.IsAbs(path) {
		if rel, err = filepath.Rel(rt.cfg.Workspace, path); err != nil || strings.HasPrefix(rel, "..") {
			return nil, toolhost.Errorf(toolhost.CodePolicy, "path %s is outside the workspace %s", path, rt.cfg.Workspace)
		}
	}
	f, err := root.Open(rel)
	if err != nil {
		if strings.Contains(err.Error(), "escapes") {
			return nil, toolhost.Errorf(toolhost.CodePolicy, "path %s is outside the workspace %s", path, rt.cfg.Workspace)
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

func (rt *Runtime) getArtifact(ctx context.Context, id string) (*sdk.Result, error) {
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "field id: %q is not an artifact id (64 lower-case hex digits)", id)
	}
	a, err := rt.st.Artifact(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		if at, err := rt.st.Evicted(ctx, id); err == nil {
			return nil, toolhost.Errorf(toolhost.CodeValidation, "artifact %s was evicted at %s to keep within the storage quotas (store { quota, role_quota }): put it again", id, at.Format(time.RFC3339))
		}
		return nil, toolhost.Errorf(toolhost.CodeValidation, "no artifact %s", id)
	}
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
	}
	var data []byte
	if rt.h.Config().Store.Artifacts == "database" {
		data, err = rt.st.ArtifactData(ctx, id)
	} else {
		data, err = os.ReadFile(rt.h.ArtifactPath(id))
	}
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
