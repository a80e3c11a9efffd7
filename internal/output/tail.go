package output

// Tail keeps the last bytes written to it, up to a size given with each
// write: a ring once full, grown as it fills.
type Tail struct {
	buf  []byte
	next int // where the oldest byte is, once buf is full
	// Dropped says bytes were written past the size and the oldest dropped.
	Dropped bool
}

// Write keeps p's bytes, dropping the oldest past size.
func (t *Tail) Write(p []byte, size int) {
	if room := size - len(t.buf); room > 0 {
		n := min(room, len(p))
		if len(t.buf)+n > cap(t.buf) {
			grown := make([]byte, len(t.buf), min(size, max(2*cap(t.buf), len(t.buf)+n, 4096)))
			copy(grown, t.buf)
			t.buf = grown
		}
		t.buf, p = append(t.buf, p[:n]...), p[n:]
	}
	if len(p) == 0 {
		return
	}
	t.Dropped = true
	if len(p) >= len(t.buf) {
		copy(t.buf, p[len(p)-len(t.buf):])
		t.next = 0
		return
	}
	n := copy(t.buf[t.next:], p)
	copy(t.buf, p[n:])
	t.next = (t.next + len(p)) % len(t.buf)
}

// Len is how many bytes it holds.
func (t *Tail) Len() int { return len(t.buf) }

// String is what it holds, oldest first.
func (t *Tail) String() string { return string(t.buf[t.next:]) + string(t.buf[:t.next]) }
