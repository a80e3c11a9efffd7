package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolhost/toolhost/sdk"
)

// maxEditBytes is the largest file edit_file reads into memory.
const maxEditBytes = 16 << 20

// EditArgs are the arguments of edit_file.
type EditArgs struct {
	Path    string `json:"path" jsonschema:"the file to edit: relative to the first root, or absolute inside a root"`
	Find    string `json:"find" jsonschema:"the exact text to replace (plain text, not a regular expression); it must occur exactly once unless all is set"`
	Replace string `json:"replace" jsonschema:"the text to put in place of find"`
	All     bool   `json:"all,omitempty" jsonschema:"replace every occurrence of find, not only a single one"`
}

func (w *workspace) edit(ctx context.Context, req *sdk.Request[EditArgs]) (*sdk.Result, error) {
	a := req.Args
	if a.Find == "" {
		return nil, sdk.Errorf(sdk.CodeValidation, "find must not be empty")
	}
	r, rel, err := w.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	content, err := readSmall(ctx, r, rel, a.Path)
	if err != nil {
		return nil, err
	}
	n := strings.Count(content, a.Find)
	switch {
	case n == 0:
		return nil, sdk.Errorf(sdk.CodeToolExec, "find text not found in %s", a.Path)
	case n > 1 && !a.All:
		return nil, sdk.Errorf(sdk.CodeToolExec, "find text matches %d times in %s: pass all=true to replace every occurrence, or a longer find that matches once", n, a.Path)
	}
	if size := int64(len(content)) + int64(n)*(int64(len(a.Replace))-int64(len(a.Find))); size > maxEditBytes {
		return nil, sdk.Errorf(sdk.CodeToolExec, "%s: the edit would make it %d bytes, larger than edit_file's limit of %d", a.Path, size, maxEditBytes)
	}
	d, err := r.subroot(filepath.Dir(rel), false)
	if err == nil {
		defer d.Close()
		err = overwrite(r, d, rel, strings.Replace(content, a.Find, a.Replace, n))
	}
	if err != nil {
		return nil, fsError(a.Path, err)
	}
	res := sdk.Text(fmt.Sprintf("replaced %d occurrence(s)", n))
	res.Meta = map[string]any{"replacements": n}
	return res, nil
}

// readSmall reads the regular file rel of r whole, until ctx ends, refusing
// one larger than maxEditBytes; path is the caller's name for it.
func readSmall(ctx context.Context, r root, rel, path string) (string, error) {
	f, err := r.open(rel, os.O_RDONLY)
	if err != nil {
		return "", fsError(path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return "", fsError(path, err)
	case info.Size() > maxEditBytes:
		return "", sdk.Errorf(sdk.CodeToolExec, "%s: %d bytes is larger than edit_file's limit of %d", path, info.Size(), maxEditBytes)
	}
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, f}, maxEditBytes+1))
	if err != nil {
		return "", fsError(path, err)
	}
	if len(b) > maxEditBytes {
		return "", sdk.Errorf(sdk.CodeToolExec, "%s: larger than edit_file's limit of %d bytes", path, maxEditBytes)
	}
	return string(b), nil
}
