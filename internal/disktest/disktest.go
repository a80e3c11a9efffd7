// Package disktest gives tests a small file system of their own to fill:
// a tmpfs that the test mounts, which needs root (the tests run as root
// here and in CI; without it a test fails, saying so, as the sandbox's
// tests do without bubblewrap).
package disktest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (as mount's size= option takes it: "4m") at
// a new directory, open to every user (the PostgreSQL of pgtest runs as
// nobody), and returns its path. It is unmounted, lazily, and removed when
// t ends.
func Mount(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("disktest: this test mounts a small tmpfs of its own to fill it, which needs root: run it as root, as scripts/test and CI do")
	}
	// Not under t.TempDir, whose directories only we may enter.
	dir, err := os.MkdirTemp("", "toolhost-disk-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		os.Remove(dir)
		t.Fatalf("disktest: mount a tmpfs of %s at %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("disktest: unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// Fill writes zeros to a new file in dir until its file system is full,
// and returns the file's path: removing it frees the space.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := io.Copy(f, zeros{})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("disktest: filling %s: %v after %d bytes, want ENOSPC", dir, err, n)
	}
	t.Logf("disktest: filled %s with %d MiB", dir, n>>20)
	return path
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
