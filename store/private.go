package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The modes of the data directory's contents: only the owner may read them,
// since they hold conversations, call results, saved outputs, artifacts and
// the admin token.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// Tighten makes the data directory dir and everything below it private: it
// takes the group's and others' permissions away from every directory and
// regular file that has any. It returns the paths it changed (none when dir is missing or
// already private). Symbolic links are not followed.
func Tighten(dir string) ([]string, error) {
	var changed []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 == 0 {
			return nil
		}
		if err := os.Chmod(path, info.Mode().Perm()&^0o077); err != nil {
			return err
		}
		changed = append(changed, path)
		return nil
	})
	if err != nil {
		return changed, fmt.Errorf("store: tighten %s: %w", dir, err)
	}
	return changed, nil
}

// createPrivate creates the file at path with FileMode unless it exists, so
// that SQLite, which gives its journal and WAL files the database's mode,
// never makes them readable by others.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, FileMode)
	if err != nil {
		return err
	}
	return f.Close()
}
