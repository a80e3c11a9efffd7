package jsonline

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

// TestMembers: the top-level id and method of an object are found wherever
// they are (a TypeScript server writes the id after the result), whatever
// pieces the object comes in, and nothing nested or inside a string is
// taken for them.
func TestMembers(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	for _, c := range []struct {
		line, id string
		method   bool
	}{
		{`{"result":{"content":[{"type":"text","text":"` + long + `"}]},"jsonrpc":"2.0","id":5}`, "5", false},
		{`{"jsonrpc":"2.0","id":"a\"b","result":{"id":7,"method":"x"}}`, `"a\"b"`, false},
		{`{"jsonrpc":"2.0", "id" : -12 ,"error":{"code":1,"message":"` + long + `"}}`, "-12", false},
		{`{"text":"\\\",\"id\":9,\"method\":1","jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + long + `"}}`, "", true},
		{`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}`, "3", true},
		{`{"jsonrpc":"2.0","id":{"a":1},"result":{}}`, "", false},
		{`{"jsonrpc":"2.0","id":null,"result":{}}`, "", false},
		{`{"jsonrpc":"2.0","id":"` + long + `","result":{}}`, "", false},
		{`{"jsonrpc":"2.0","result":{"ids":[1,2],"methods":"` + long + `"}}`, "", false},
	} {
		for _, piece := range []int{1, 7, 4096, len(c.line)} {
			var m members
			for rest := c.line; len(rest) > 0; {
				n := min(piece, len(rest))
				_, _ = m.Write([]byte(rest[:n]))
				rest = rest[n:]
			}
			if string(m.ID()) != c.id || m.HasMethod() != c.method {
				t.Errorf("%.60s… in pieces of %d: id %s, method %t; want %s, %t", c.line, piece, m.ID(), m.HasMethod(), c.id, c.method)
			}
		}
	}
}

// TestSkip: skip reads through the line, longer than the reader's buffer,
// showing all of it, and leaves the next line.
func TestSkip(t *testing.T) {
	line := strings.Repeat("y", 10_000) + "\n"
	rd := bufio.NewReaderSize(strings.NewReader(line+"next\n"), 16)
	seen := 0
	if err := skip(rd, func(b []byte) { seen += len(b) }); err != nil || seen != len(line) {
		t.Fatalf("skip: %v, saw %d bytes of %d", err, seen, len(line))
	}
	if rest, _ := rd.ReadString('\n'); rest != "next\n" {
		t.Errorf("after skip: %q", rest)
	}
}

// TestReader: lines within the bound come whole, a line longer than the
// reader's buffer included; one over it comes as its size, every byte of it
// seen and none kept; the line after it is read as usual.
func TestReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	over := strings.Repeat("y", 300)
	in := "a\n" + long + "\n" + over + "\nb"
	r := newReader(bufio.NewReaderSize(strings.NewReader(in), 16), 200)
	var seen int
	for i, want := range []struct {
		line string
		size int
	}{{"a\n", 0}, {long + "\n", 0}, {"", 300}, {"b", 0}} {
		seen = 0
		line, size, err := r.Next(func(b []byte) { seen += len(b) })
		if string(line) != want.line || size != want.size {
			t.Errorf("line %d: %q, size %d; want %q, %d", i, line, size, want.line, want.size)
		}
		if want.size > 0 && seen != want.size+1 {
			t.Errorf("line %d: %d bytes seen, want %d and its newline", i, seen, want.size)
		}
		if i == 3 && err != io.EOF {
			t.Errorf("the last line ended with %v, want EOF", err)
		}
	}
}
