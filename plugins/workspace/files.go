package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
)

// A tool opens a file for its content only when it is a regular file with a
// single link, and reads it in bounded memory, stopping when the call ends.
// A named pipe, a socket or a device is refused at once: it is opened
// without waiting (O_NONBLOCK) and placed by fstat before anything is read
// or written, so no pipe without a writer holds a thread. A regular file
// with other hard links is refused too, for reading as for writing: another
// of its names may lie outside the roots, or in the host's files, and
// neither os.Root nor the host-path check (which places a file by the name
// it was opened by) can see where.

// Bounds of a read_file page. The host cuts a result to its output limit
// (50 KiB unless configured), which it does not tell the module: a page holds
// at most pageBytes of lines, so that it fits in the default limit with its
// continuation line, and a line at most maxLineBytes, so that the longest
// fits in a page with its note.
const (
	pageBytes    = 50<<10 - 64
	maxLineBytes = pageBytes - 64
	readBuffer   = 64 << 10 // the buffer a file is read through
)

// notRegular is the error for a file that is not a regular file; it names
// what the file is ("a named pipe").
type notRegular string

func (k notRegular) Error() string { return "is " + string(k) + ", not a regular file" }

// linked is the error for a regular file with other hard links: its number
// of links.
type linked uint64

func (n linked) Error() string {
	return fmt.Sprintf("has %d hard links: refused, as another may lie outside the workspace roots", uint64(n))
}

// regular returns nil for a regular file with a single link, and a
// notRegular or linked error for anything else.
func regular(info fs.FileInfo) error {
	m := info.Mode()
	switch {
	case m.IsRegular():
	case m.IsDir():
		return notRegular("a directory")
	case m&fs.ModeNamedPipe != 0:
		return notRegular("a named pipe")
	case m&fs.ModeSocket != 0:
		return notRegular("a socket")
	case m&fs.ModeCharDevice != 0:
		return notRegular("a character device")
	case m&fs.ModeDevice != 0:
		return notRegular("a block device")
	default:
		return notRegular("an irregular file")
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return linked(st.Nlink)
	}
	return nil
}

// regularFile is regular for the open file f, asked of its descriptor.
func regularFile(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	return regular(info)
}

// ctxReader reads from r until ctx ends, and then fails with ctx's error,
// so that a long read stops with its call.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// lineReader reads lines in bounded memory, whatever their length: a line
// longer than max bytes keeps its first max (cut on a character boundary),
// and the rest is skipped, counted, never held.
type lineReader struct {
	br   *bufio.Reader
	max  int
	line []byte // the kept part of the last line read
}

// newLineReader reads the lines of r, until ctx ends, keeping at most max
// bytes of each.
func newLineReader(ctx context.Context, r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(ctxReader{ctx, r}, readBuffer), max: max, line: make([]byte, 0, max)}
}

// next reads the next line. It returns at most max bytes of it, without its
// newline (valid until the next call), how many bytes of it were cut, and
// whether it ended with a newline (the last line may not); io.EOF when no
// line is left.
func (l *lineReader) next() (line []byte, cut int64, newline bool, err error) {
	l.line = l.line[:0]
	read := false
	for {
		s, err := l.br.ReadSlice('\n')
		read = read || len(s) > 0
		newline = err == nil // ReadSlice fails unless s ends with the newline
		if newline {
			s = s[:len(s)-1]
		}
		keep := min(len(s), l.max-len(l.line))
		l.line = append(l.line, s[:keep]...)
		cut += int64(len(s) - keep)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && read:
		case err != nil:
			return nil, 0, false, err
		}
		if cut > 0 { // the kept part must not end in half a character
			n := len(l.line)
			for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
				if utf8.RuneStart(l.line[i]) {
					if !utf8.FullRune(l.line[i:]) {
						cut += int64(n - i)
						l.line = l.line[:i]
					}
					break
				}
			}
		}
		return l.line, cut, newline, nil
	}
}

// page is a page of read_file.
type page struct {
	text  string
	lines int   // the lines read: the page's, those before it and the one after
	next  int   // the first line after the page, when one follows; else 0
	cut   int64 // the bytes cut from long lines
}

// readPage reads the lines offset … offset+limit-1 of r, until ctx ends. It
// keeps at most pageBytes of them, ending the page early before a line that
// would not fit, but always holds a line when one is there: a line longer
// than maxLineBytes is cut, and ends with a note of the bytes cut.
func readPage(ctx context.Context, r io.Reader, offset, limit int) (page, error) {
	var p page
	var text strings.Builder
	lr := newLineReader(ctx, r, maxLineBytes)
	for {
		line, cut, newline, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return page{}, err
		}
		p.lines++
		if p.lines < offset {
			continue
		}
		var note string
		if cut > 0 {
			note = fmt.Sprintf("[... %d more bytes of this line]", cut)
		}
		if p.lines-offset == limit || text.Len() > 0 && text.Len()+len(line)+len(note)+1 > pageBytes {
			p.next = p.lines
			break
		}
		text.Write(line)
		text.WriteString(note)
		if newline {
			text.WriteByte('\n')
		}
		p.cut += cut
	}
	p.text = text.String()
	return p, nil
}
