package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// hugeSize is the size of the newline-free sparse file of the memory attacks.
const hugeSize = 1 << 30

// makeHuge makes name a sparse file of hugeSize bytes without a newline.
func makeHuge(t testing.TB, name string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(hugeSize); err != nil {
		t.Fatal(err)
	}
}

// TestHostileFiles is a hostile agent's attacks with files that are not what
// a tool expects: a named pipe or a socket, which would hold the call's thread
// or fail obscurely; a device; a hard link to a file outside the root; an edit
// multiplying a file past the limit. Each is refused at once with a message
// naming why, and leaves everything as it was.
func TestHostileFiles(t *testing.T) {
	requirePrograms(t)
	f := newFixture(t)
	in := func(name string) string { return filepath.Join(f.root, name) }
	linkedFile := filepath.Join(f.outside, "secret.txt") // hard.txt's other name
	if err := syscall.Mkfifo(in("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", in("sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	err = os.Link(linkedFile, in("hard.txt"))
	if errors.Is(err, syscall.EXDEV) { // in a sandbox, whose Landlock refuses links across directories
		linkedFile = in("secret.txt")
		writeFiles(t, f.root, map[string]string{"secret.txt": secret + "\n"})
		err = os.Link(linkedFile, in("hard.txt"))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("hard.txt", in("alias")); err != nil {
		t.Fatal(err)
	}
	grow := strings.Repeat("a", 1<<20)
	writeFiles(t, f.root, map[string]string{"grow.txt": grow})
	// /dev is a second root, for its devices.
	p := sdktest.New(t, newGroup(), &sdktest.Options{Config: map[string]any{"roots": []string{f.root, "/dev"}}})
	// call makes a call, which must end within a minute (far past any
	// refusal): a call blocked on a pipe fails its row, and the rows after
	// it still run.
	call := func(t *testing.T, tool string, args any) *sdk.Result {
		t.Helper()
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := p.Do(ctx, &toolhost.CallRequest{Tool: tool, Arguments: raw})
		if err != nil {
			t.Fatalf("%s did not end: %v", tool, err)
		}
		return res
	}

	const pipe, socket, device = "is a named pipe, not a regular file", "is a socket, not a regular file", "is a character device, not a regular file"
	const links = "has 2 hard links: refused"
	for _, a := range []struct {
		name string
		tool string
		args any
		code sdk.Code
		msg  string // in the error's message
	}{
		{"read a pipe", "read_file", ReadArgs{Path: "fifo"}, sdk.CodeToolExec, "fifo: " + pipe},
		{"append to a pipe", "write_file", WriteArgs{Path: "fifo", Content: "x", Mode: "append"}, sdk.CodeToolExec, pipe},
		{"overwrite a pipe", "write_file", WriteArgs{Path: "fifo", Content: "x"}, sdk.CodeToolExec, pipe},
		{"edit a pipe", "edit_file", EditArgs{Path: "fifo", Find: "a", Replace: "b"}, sdk.CodeToolExec, pipe},
		{"search a pipe", "search_files", SearchArgs{Path: "fifo", Pattern: "a"}, sdk.CodeToolExec, pipe},
		{"read a socket", "read_file", ReadArgs{Path: "sock"}, sdk.CodeToolExec, socket},
		{"append to a socket", "write_file", WriteArgs{Path: "sock", Content: "x", Mode: "append"}, sdk.CodeToolExec, socket},
		{"read a device", "read_file", ReadArgs{Path: "/dev/null"}, sdk.CodeToolExec, device},
		{"append to a device", "write_file", WriteArgs{Path: "/dev/null", Content: "x", Mode: "append"}, sdk.CodeToolExec, device},
		{"read a hard link out", "read_file", ReadArgs{Path: "hard.txt"}, sdk.CodePolicy, "hard.txt: " + links},
		{"overwrite a hard link out", "write_file", WriteArgs{Path: "hard.txt", Content: "pwned"}, sdk.CodePolicy, links},
		{"append to a hard link out", "write_file", WriteArgs{Path: "hard.txt", Content: "pwned", Mode: "append"}, sdk.CodePolicy, links},
		{"overwrite a hard link out through a symlink", "write_file", WriteArgs{Path: "alias", Content: "pwned"}, sdk.CodePolicy, links},
		{"edit a hard link out", "edit_file", EditArgs{Path: "hard.txt", Find: "secret", Replace: "pwned"}, sdk.CodePolicy, links},
		{"search a hard link out", "search_files", SearchArgs{Path: "hard.txt", Pattern: "secret"}, sdk.CodePolicy, links},
		{"edit growing past the limit", "edit_file", EditArgs{Path: "grow.txt", Find: "a", Replace: strings.Repeat("b", 64), All: true}, sdk.CodeToolExec, "larger than edit_file's limit"},
	} {
		t.Run(a.name, func(t *testing.T) {
			msg := sdktest.Fails(t, call(t, a.tool, a.args), a.code)
			if !strings.Contains(msg, a.msg) {
				t.Errorf("message %q lacks %q", msg, a.msg)
			}
		})
	}

	// Nothing changed, and no call was left waiting.
	if b, err := os.ReadFile(linkedFile); err != nil || string(b) != secret+"\n" {
		t.Errorf("the linked file was changed: %q, %v", b, err)
	}
	if a, b := stat(t, linkedFile), stat(t, in("hard.txt")); !os.SameFile(a, b) {
		t.Errorf("hard.txt is no longer a link to %s", linkedFile)
	}
	if info := stat(t, in("fifo")); info.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v", info.Mode())
	}
	if b, err := os.ReadFile(in("grow.txt")); err != nil || string(b) != grow {
		t.Errorf("grow.txt was changed: %d bytes, %v", len(b), err)
	}
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "os.rootOpenFileNolog") {
		t.Errorf("a call is still waiting to open a file:\n%s", stacks)
	}
}

// stat is os.Lstat, failing the test on an error.
func stat(t *testing.T, name string) os.FileInfo {
	t.Helper()
	info, err := os.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestReadHugeLine is a hostile agent's attack of a 1 GiB file without a
// newline, read four times at once: each read holds a page and a line at
// most, and stops when its call ends.
func TestReadHugeLine(t *testing.T) {
	f := newFixture(t)
	makeHuge(t, filepath.Join(f.root, "huge"))
	w := &workspace{}
	if err := w.configure(context.Background(), &sdk.ConfigureRequest{Config: rootsConfig(f.root)}); err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context) (*sdk.Result, error) {
		return w.read(ctx, &sdk.Request[ReadArgs]{Args: ReadArgs{Path: "huge"}})
	}
	want := strings.Repeat("\x00", maxLineBytes) + fmt.Sprintf("[... %d more bytes of this line]", hugeSize-maxLineBytes)

	t.Run("memory bounded", func(t *testing.T) {
		const reads, bound = 4, 4 << 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		results := make([]*sdk.Result, reads)
		errs := make([]error, reads)
		for i := range reads {
			wg.Go(func() { results[i], errs[i] = read(context.Background()) })
		}
		wg.Wait()
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%d reads of a %d-byte line allocated %d bytes", reads, hugeSize, alloc)
		if alloc > bound {
			t.Errorf("%d reads allocated %d bytes, want at most %d", reads, alloc, bound)
		}
		for i, res := range results {
			switch {
			case errs[i] != nil:
				t.Fatalf("read %d: %v", i, errs[i])
			case res.Stdout != want || !res.TruncatedBytes || res.TruncatedLines:
				t.Errorf("read %d: %d bytes ending %q, truncated bytes %v, lines %v; want %d ending %q", i, len(res.Stdout), res.Stdout[max(0, len(res.Stdout)-40):], res.TruncatedBytes, res.TruncatedLines, len(want), want[len(want)-40:])
			case fmt.Sprint(res.Meta["cut_bytes"]) != fmt.Sprint(hugeSize-maxLineBytes):
				t.Errorf("read %d: meta %v, want cut_bytes %d", i, res.Meta, hugeSize-maxLineBytes)
			}
		}
	})
	t.Run("stops when the call ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := read(ctx); err != context.Canceled {
			t.Errorf("read after the call ended: error %v, want %v", err, context.Canceled)
		}
	})
}

// endless is a file without end and without a newline, which cancels its
// call after reading cancelAfter bytes.
type endless struct {
	read, cancelAfter int
	cancel            context.CancelFunc
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read += len(p); e.read >= e.cancelAfter {
		e.cancel()
	}
	return len(p), nil
}

func TestReadPageStopsWhenCallEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := &endless{cancelAfter: 1 << 30, cancel: cancel}
	if _, err := readPage(ctx, e, 1, 10); err != context.Canceled {
		t.Fatalf("readPage = %v, want %v", err, context.Canceled)
	}
	if e.read > e.cancelAfter+readBuffer {
		t.Errorf("read %d bytes; the call ended after %d", e.read, e.cancelAfter)
	}
}

func TestReadPageBounds(t *testing.T) {
	f := newFixture(t)
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf("%04d %s", i+1, strings.Repeat("x", 95)))
	}
	long := "x" + strings.Repeat("€", maxLineBytes) // cut within a character
	writeFiles(t, f.root, map[string]string{
		"many.txt": strings.Join(lines, "\n") + "\n",
		"long.txt": "short\n" + long + "\nafter\n",
	})
	p := f.plugin(t)

	t.Run("a page ends at its byte bound and the cursor continues", func(t *testing.T) {
		var got strings.Builder
		pages := 0
		for offset := 1; offset > 0; pages++ {
			res := p.Call("read_file", ReadArgs{Path: "many.txt", Offset: offset})
			out := sdktest.OK(t, res)
			if len(out) > 50<<10 || res.TruncatedBytes {
				t.Fatalf("offset %d: %d bytes, truncated bytes %v; want at most 50 KiB, none cut", offset, len(out), res.TruncatedBytes)
			}
			offset = 0
			if res.NextPageCursor != "" {
				var err error
				if offset, err = strconv.Atoi(res.NextPageCursor); err != nil {
					t.Fatalf("cursor %q: %v", res.NextPageCursor, err)
				}
				out = strings.TrimSuffix(out, "[continue with offset="+res.NextPageCursor+"]")
			}
			got.WriteString(out)
		}
		if want := strings.Join(lines, "\n") + "\n"; got.String() != want || pages < 4 {
			t.Errorf("%d pages read %d bytes, want the file's %d in 4 pages or more", pages, got.Len(), len(want))
		}
	})
	t.Run("a long line is cut with a note", func(t *testing.T) {
		res := p.Call("read_file", ReadArgs{Path: "long.txt"})
		out := sdktest.OK(t, res)
		short, rest, _ := strings.Cut(out, "\n")
		cutLine, next, _ := strings.Cut(rest, "\n")
		if short != "short" || !strings.HasPrefix(long, strings.Split(cutLine, "[")[0]) || !utf8.ValidString(out) {
			t.Errorf("read = %.40q…, want short and the long line's beginning, whole characters", out)
		}
		kept := len(strings.Split(cutLine, "[")[0])
		if note := fmt.Sprintf("[... %d more bytes of this line]", len(long)-kept); !strings.HasSuffix(cutLine, note) || kept < maxLineBytes-3 {
			t.Errorf("the line keeps %d bytes and ends %q; want about %d and %q", kept, cutLine[len(cutLine)-40:], maxLineBytes, note)
		}
		if !res.TruncatedBytes || fmt.Sprint(res.Meta["cut_bytes"]) != fmt.Sprint(len(long)-kept) {
			t.Errorf("truncated bytes %v, meta %v; want cut_bytes %d", res.TruncatedBytes, res.Meta, len(long)-kept)
		}
		if next != "after\n" && !strings.HasPrefix(next, "[continue with offset=3]") {
			t.Errorf("after the cut line: %q", next)
		}
	})
}
