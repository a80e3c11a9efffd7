package output

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The bounds of what [Stderr.Lines] gives: the last lines a module wrote
// before it exited, for the error that says why it did not start.
const (
	// stderrLines is how many lines it gives, at most.
	stderrLines = 8
	// stderrLineBytes is the longest line it gives, escaped, "…" included.
	stderrLineBytes = 400
	// stderrKeep is how many of the last bytes written it keeps.
	stderrKeep = 4 << 10
)

// Stderr keeps the end of what a module writes to its stderr: an
// io.Writer, safe for concurrent use, that holds the last few KiB however
// much is written. The module's text is untrusted: [Stderr.Lines] gives it
// bounded and escaped.
type Stderr struct {
	mu   sync.Mutex
	tail Tail
}

// Write keeps the end of p; it never fails.
func (s *Stderr) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.tail.Write(p, stderrKeep)
	s.mu.Unlock()
	return len(p), nil
}

// Lines are the last lines written (at most stderrLines, blank ones
// left out, a run of stack frames as its first frame and their count),
// each escaped by [Escape] and cut to stderrLineBytes: text that can
// neither start another line of a log nor carry a terminal's escape
// sequences.
func (s *Stderr) Lines() []string {
	s.mu.Lock()
	text, dropped := s.tail.String(), s.tail.Dropped
	s.mu.Unlock()
	all := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if dropped { // the first line lost its beginning
		all[0] = "…" + all[0]
	}
	var out []string
	frames := 0 // in the run of stack frames the last line of out starts
	for _, l := range all {
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case isFrame(l) && frames > 0:
			frames++
			continue
		}
		if frames > 1 {
			out[len(out)-1] += fmt.Sprintf(" … and %d more frames", frames-1)
		}
		frames = 0
		if isFrame(l) {
			frames = 1
		}
		out = append(out, l)
	}
	if frames > 1 {
		out[len(out)-1] += fmt.Sprintf(" … and %d more frames", frames-1)
	}
	out = out[max(0, len(out)-stderrLines):]
	for i, l := range out {
		out[i] = cutLine(Escape(l), stderrLineBytes)
	}
	return slices.Clip(out)
}

// isFrame reports whether a line is a frame of a stack trace as node (and
// Java) print them: "    at f (file:line:col)".
func isFrame(line string) bool {
	trimmed := strings.TrimLeft(line, " \t")
	return len(trimmed) < len(line) && strings.HasPrefix(trimmed, "at ")
}

// cutLine shortens s to at most n bytes, ending in "…" when cut, never
// splitting a UTF-8 character.
func cutLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return bytes(s, n-len("…"), false) + "…"
}

// Escape makes untrusted text printable on one line: control characters
// (a newline, a carriage return, ESC of a terminal's escape sequence),
// other unprintable ones (a bidirectional override) and invalid UTF-8
// become Go escapes (\n, \x1b, \u202e); a backslash is doubled, so that an
// escape in the output always stands for a character of the input.
func Escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// LogLines is an io.Writer that hands each line written to it, escaped
// (escape) and cut to stderrLineBytes (then "…" at its end), to log:
// a module's stderr relayed to the host's log line by line, so that its
// text can start no line of the log of its own, however it is chunked.
// What follows the last newline waits for the next write, bounded as a
// line is, whatever is written. It is for one writer at a time.
type LogLines struct {
	log  func(line string)
	line []byte // the line so far, at most stderrLineBytes
	cut  bool   // the line so far was longer
}

// NewLogLines returns a [LogLines] that hands each line to log.
func NewLogLines(log func(line string)) *LogLines { return &LogLines{log: log} }

// Write hands p's complete lines to the log; it never fails.
func (w *LogLines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := slices.Index(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := stderrLineBytes - len(w.line); len(chunk) > room {
			chunk, w.cut = chunk[:room], true
		}
		w.line = append(w.line, chunk...)
		if i < 0 {
			break
		}
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

// emit hands the line so far to the log, unless it is blank, and starts
// the next.
func (w *LogLines) emit() {
	line := strings.TrimRight(string(w.line), "\r")
	if w.cut || strings.TrimSpace(line) != "" {
		e := cutLine(Escape(line), stderrLineBytes)
		if w.cut && !strings.HasSuffix(e, "…") {
			e += "…"
		}
		w.log(e)
	}
	w.line, w.cut = w.line[:0], false
}
