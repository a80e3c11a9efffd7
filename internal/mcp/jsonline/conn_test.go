package jsonline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
	"github.com/toolhost/toolhost/internal/proctest"
	"pgregory.net/rapid"
)

// opaqueReader hides what its reader is: the connection cannot tell that
// closing it ends a read, and reads ahead on a goroutine.
type opaqueReader struct{ io.ReadCloser }

// stuckReader's Read returns only when the test ends, whatever Close does
// (as a read of a blocking stdin).
type stuckReader struct{ end chan struct{} }

func (r stuckReader) Read([]byte) (int, error) { <-r.end; return 0, io.EOF }
func (r stuckReader) Close() error             { return nil }

// lineConnModes names the ways a Conn reads: in Read itself (a pipe),
// or ahead on a goroutine (a reader whose Close may not end a Read).
var lineConnModes = []struct {
	name  string
	ahead bool
	wrap  func(*io.PipeReader) io.ReadCloser
}{
	{"direct", false, func(r *io.PipeReader) io.ReadCloser { return r }},
	{"ahead", true, func(r *io.PipeReader) io.ReadCloser { return opaqueReader{r} }},
}

// newConn returns a Conn of in and out as the MCP front makes one: closing
// it closes in, and out with closeOut unless it is nil.
func newConn(in io.ReadCloser, out io.Writer, closeOut func() error, maxLine int, ahead bool) *Conn {
	return NewConn(in, out, Options{MaxLine: maxLine, ReadAhead: ahead, Close: func() error {
		err := in.Close()
		if closeOut != nil {
			err = errors.Join(err, closeOut())
		}
		return err
	}})
}

// lineConnPeer is the other end of a Conn under test, reading its
// messages as the SDK does, one Read after another.
type lineConnPeer struct {
	conn mcp.Connection
	in   *io.PipeWriter // the conn's input
	out  *bufio.Reader  // the conn's output
	msgs chan readResult
}

func newLineConnPeer(t *testing.T, wrap func(*io.PipeReader) io.ReadCloser, ahead bool, maxLine int) *lineConnPeer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := newConn(wrap(inR), outW, outW.Close, maxLine, ahead)
	p := &lineConnPeer{conn: conn, in: inW, out: bufio.NewReader(outR), msgs: make(chan readResult, 100)}
	go func() {
		for {
			msg, err := conn.Read(context.Background())
			p.msgs <- readResult{msg, err}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = conn.Close(); _ = inW.Close(); _ = outR.Close() })
	return p
}

// send writes s to the conn's input on a goroutine: the conn answers bad
// lines on its output as it reads them, and the pipes hold nothing.
func (p *lineConnPeer) send(s string) {
	go func() { _, _ = io.WriteString(p.in, s) }()
}

// sendAndEnd writes s, and then ends the conn's input.
func (p *lineConnPeer) sendAndEnd(s string) {
	go func() { _, _ = io.WriteString(p.in, s); _ = p.in.Close() }()
}

// read returns the conn's next message, within the test's patience.
func (p *lineConnPeer) read(t *testing.T) (jsonrpc.Message, error) {
	t.Helper()
	select {
	case r := <-p.msgs:
		return r.msg, r.err
	case <-time.After(proctest.Patience):
		t.Fatalf("Read did not return within %s", proctest.Patience)
		return nil, nil
	}
}

// answer returns the next line the conn wrote.
func (p *lineConnPeer) answer(t *testing.T) string {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// TestConnLines: each line that is not a message is answered as JSON-RPC
// says (-32700 not JSON, id null; -32600 no message, with the request's id
// when it has one; a batch; a line over the limit, however long, without
// keeping it, to the request's id when it is a request) and skipped; blank lines are skipped, CRLF ends a line as LF
// does, and a last line without a newline is read before the end.
func TestConnLines(t *testing.T) {
	for _, mode := range lineConnModes {
		t.Run(mode.name, func(t *testing.T) {
			const maxLine = 100
			p := newLineConnPeer(t, mode.wrap, mode.ahead, maxLine)
			for _, tt := range []struct {
				line, want string
			}{
				{"this is not json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
				{`{"jsonrpc":"2.0","id":3,"mthd":"x"}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,`},
				{`{"jsonrpc":"2.0","id":"a","mthd":"x"}`, `{"jsonrpc":"2.0","id":"a","error":{"code":-32600,`},
				{`{"jsonrpc":"1.0","id":4,"method":"ping"}`, `{"jsonrpc":"2.0","id":4,"error":{"code":-32600,`},
				{`{"jsonrpc":"2.0","id":{},"mthd":"x"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
				{`{"jsonrpc":"2.0","id":5}`, `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"invalid request: neither`},
				{`{"jsonrpc":"2.0","id":6,"method":"ping"} {}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
				{`{"jsonrpc":"2.0","id":7,"method":"ping"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
				{`[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: JSON-RPC batches are not supported`},
				{`[{"jsonrpc":"2.0","id":8,"method":"ping"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: JSON-RPC batches`},
				{`[{"jsonrpc":"2.0","id":8,`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
				{`"x` + strings.Repeat("x", maxLine) + `"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a message longer than 100 bytes is refused"}}`},
				{strings.Repeat("x", 200<<10), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a message longer than 100 bytes is refused"}}`},
				{`{"jsonrpc":"2.0","id":9,"method":"m","params":"` + strings.Repeat("x", 200<<10) + `"}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"a message longer than 100 bytes is refused"}}`},
				{`{"jsonrpc":"2.0","id":10,"result":"` + strings.Repeat("x", 200) + `"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a message longer than 100 bytes is refused"}}`},
			} {
				p.send(tt.line + "\n")
				if got := p.answer(t); !strings.HasPrefix(got, tt.want) {
					t.Errorf("%.40s: %s, want %s", tt.line, got, tt.want)
				}
			}
			p.sendAndEnd("\n  \r\n" + `{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}` + "\r\n" +
				`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
				`{"jsonrpc":"2.0","id":"r","result":{}}` + "\n" +
				`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}` + "\n" +
				`  {"jsonrpc":"2.0","id":3,"method":"x"}`)
			var got []string
			for range 5 {
				msg, err := p.read(t)
				if err != nil {
					t.Fatal(err)
				}
				data, _ := jsonrpc.EncodeMessage(msg)
				got = append(got, string(data))
			}
			want := []string{
				`{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":"r","result":{}}`,
				`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}`,
				`{"jsonrpc":"2.0","id":3,"method":"x"}`,
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("messages:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// The last line had no newline: the input's end came after it.
			if _, err := p.read(t); !errors.Is(err, io.EOF) {
				t.Errorf("at the input's end: %v, want io.EOF", err)
			}
		})
	}
}

// TestConnLongLines: a line longer than the reader's buffer is read
// whole up to the limit; with no limit (< 0), however long.
func TestConnLongLines(t *testing.T) {
	for _, mode := range lineConnModes {
		for _, maxLine := range []int{0, -1} {
			t.Run(fmt.Sprintf("%s/%d", mode.name, maxLine), func(t *testing.T) {
				p := newLineConnPeer(t, mode.wrap, mode.ahead, maxLine)
				for _, n := range []int{100, 64 << 10, 200 << 10, 1 << 20, 10} {
					p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"m","params":{"s":%q}}`+"\n", n, strings.Repeat("x", n)))
					msg, err := p.read(t)
					if err != nil {
						t.Fatal(err)
					}
					req, ok := msg.(*jsonrpc.Request)
					var params struct{ S string }
					if !ok || json.Unmarshal(req.Params, &params) != nil || len(params.S) != n {
						t.Fatalf("a message of %d bytes: %T %v", n, msg, ok)
					}
				}
			})
		}
	}
}

// TestConnClose: Close ends a Read under way (it returns io.EOF), when
// closing the input ends its read (a pipe, a polled file) and when nothing
// ends it; a Read after Close returns io.EOF too, a Write
// mcp.ErrConnectionClosed; the output is closed only when asked. A Read
// with its context done returns at once.
func TestConnClose(t *testing.T) {
	end := make(chan struct{})
	defer close(end)
	osPipe := func(t *testing.T) io.ReadCloser {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		return r
	}
	for _, tt := range []struct {
		name   string
		in     func(t *testing.T) io.ReadCloser
		direct bool
	}{
		{"io.Pipe", func(*testing.T) io.ReadCloser { r, _ := io.Pipe(); return r }, true},
		{"os.Pipe", osPipe, true},
		{"opaque", func(*testing.T) io.ReadCloser { r, _ := io.Pipe(); return opaqueReader{r} }, false},
		{"stuck", func(*testing.T) io.ReadCloser { return stuckReader{end} }, false},
	} {
		for _, closeOut := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/closeOut=%v", tt.name, closeOut), func(t *testing.T) {
				in := tt.in(t)
				var out strings.Builder
				outClosed := false
				var closer func() error
				if closeOut {
					closer = func() error { outClosed = true; return nil }
				}
				conn := newConn(in, &out, closer, 0, !tt.direct)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if _, err := conn.Read(ctx); !errors.Is(err, context.Canceled) {
					t.Errorf("a Read with its context done: %v", err)
				}
				read := make(chan error, 2)
				readOnce := func() {
					_, err := conn.Read(context.Background())
					read <- err
				}
				go readOnce()
				time.Sleep(20 * time.Millisecond) // the Read waits for input
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() { _ = conn.Close() })
				}
				wg.Wait()
				go readOnce() // after Close
				for _, when := range []string{"under way", "after Close"} {
					select {
					case err := <-read:
						if !errors.Is(err, io.EOF) {
							t.Errorf("a Read %s: %v, want io.EOF", when, err)
						}
					case <-time.After(proctest.Patience):
						t.Fatalf("a Read %s did not end within %s", when, proctest.Patience)
					}
				}
				if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "m"}); !errors.Is(err, mcp.ErrConnectionClosed) || out.Len() > 0 {
					t.Errorf("a Write after Close: %v, wrote %q", err, out.String())
				}
				if outClosed != closeOut {
					t.Errorf("the output closed: %v, want %v", outClosed, closeOut)
				}
			})
		}
	}
}

// TestConnWrite: each message is one line, written whole however many
// goroutines write.
func TestConnWrite(t *testing.T) {
	p := newLineConnPeer(t, lineConnModes[0].wrap, false, 0)
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id, _ := jsonrpc.MakeID(float64(w*each + i))
				params := json.RawMessage(fmt.Sprintf(`{"s":%q}`, strings.Repeat("y", 10000+i)))
				if err := p.conn.Write(context.Background(), &jsonrpc.Request{ID: id, Method: "m", Params: params}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	seen := map[string]bool{}
	for range writers * each {
		line := p.answer(t)
		msg, err := jsonrpc.DecodeMessage([]byte(line))
		if err != nil {
			t.Fatalf("%.60s: %v", line, err)
		}
		seen[fmt.Sprint(msg.(*jsonrpc.Request).ID.Raw())] = true
	}
	wg.Wait()
	if len(seen) != writers*each {
		t.Errorf("%d distinct messages, want %d", len(seen), writers*each)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.conn.Write(ctx, &jsonrpc.Request{Method: "m"}); !errors.Is(err, context.Canceled) {
		t.Errorf("a Write with its context done: %v", err)
	}
}

// TestParseLine: parseLine's rules, one line for each: what is a request, a
// notification, a response, and why anything else is not a message (its
// code, the id it is answered to, the reason).
func TestParseLine(t *testing.T) {
	deep := func(n int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"m","params":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	for _, tt := range []struct {
		line string
		want string // the message re-encoded, or "CODE ID why"
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`},
		{` {"method":"ping","id":"a\"b","jsonrpc":"2.0"} `, `{"jsonrpc":"2.0","id":"a\"b","method":"ping"}`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{`{"jsonrpc":"2.0","id":null,"method":"n"}`, `{"jsonrpc":"2.0","method":"n"}`},
		{`{"jsonrpc":"2.0","id":"","method":"m"}`, `{"jsonrpc":"2.0","id":"","method":"m"}`},
		{`{"jsonrpc":"2.0","id":-9007199254740992,"method":"m"}`, `{"jsonrpc":"2.0","id":-9007199254740992,"method":"m"}`},
		{`{"jsonrpc":"2.0","id":"r","result":{}}`, `{"jsonrpc":"2.0","id":"r","result":{}}`},
		{`{"jsonrpc":"2.0","id":2,"result":null}`, `{"jsonrpc":"2.0","id":2,"result":null}`},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m","data":[1]}}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m","data":[1]}}`},
		{`{"jsonrpc":"2.0","id":3,"error":null,"result":1}`, `{"jsonrpc":"2.0","id":3,"result":1}`},
		{deep(jsondepth.Max), `{"jsonrpc":"2.0","id":1,"method":"m","params":` + strings.Repeat("[", jsondepth.Max-1) + strings.Repeat("]", jsondepth.Max-1) + `}`},

		{`not json`, `-32700 null not JSON`},
		{`{"jsonrpc":"2.0","id":4,"method":"m"} {}`, `-32700 null not JSON`},
		{`{"jsonrpc":"2.0","id":4,"method":"m","params":{"a":tru}}`, `-32700 null not JSON`},
		{`"a string"`, `-32600 null a JSON object`},
		{deep(jsondepth.Max + 1), `-32600 1 nests 1001 levels deep`},
		{`{"jsonrpc":"2.0","id":9,"method":"m","params":` + strings.Repeat("[", 1<<20), `-32600 null nests 1048577 levels deep`}, // no decoder recurses into it
		{`{"jsonrpc":"1.0","id":5,"method":"m"}`, `-32600 5 "jsonrpc"`},
		{`{"JSONRPC":"2.0","id":5,"method":"m"}`, `-32600 5 "jsonrpc"`},
		{`{"jsonrpc":"2.0","id":1.5,"method":"m"}`, `-32600 null "id"`},
		{`{"jsonrpc":"2.0","id":1e3,"method":"m"}`, `-32600 null "id"`},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"m"}`, `-32600 null "id"`},
		{`{"jsonrpc":"2.0","id":{},"method":"m"}`, `-32600 null "id"`},
		{`{"jsonrpc":"2.0","id":6,"method":7}`, `-32600 6 "method"`},
		{`{"jsonrpc":"2.0","id":6,"method":null}`, `-32600 6 "method"`},
		{`{"jsonrpc":"2.0","id":6,"method":""}`, `-32600 6 "method"`},
		{`{"jsonrpc":"2.0","id":7,"Method":"m"}`, `-32600 7 neither`},
		{`{"jsonrpc":"2.0","result":{}}`, `-32600 null neither`},
		{`{"jsonrpc":"2.0","id":"e","error":{"code":"x"}}`, `-32600 "e" "error"`},
		{`{"jsonrpc":"2.0","id":"e","error":"x"}`, `-32600 "e" "error"`},
	} {
		msg, bad := parseLine([]byte(tt.line))
		var got string
		switch {
		case (msg == nil) == (bad == nil):
			t.Fatalf("%.60s: message %v and error %v", tt.line, msg, bad)
		case msg != nil:
			b, err := jsonrpc.EncodeMessage(msg)
			if err != nil {
				t.Fatal(err)
			}
			got = string(b)
		default:
			id := string(bad.ID)
			if id == "" {
				id = "null"
			}
			got = fmt.Sprintf("%d %s %s", bad.Error.Code, id, bad.Error.Message)
		}
		code, why, _ := strings.Cut(tt.want, " ")
		if msg == nil {
			id, why, _ := strings.Cut(why, " ")
			if !strings.HasPrefix(got, code+" "+id+" ") || !strings.Contains(got, why) {
				t.Errorf("%.60s: %s, want %s", tt.line, got, tt.want)
			}
		} else if got != tt.want {
			t.Errorf("%.60s: %s, want %s", tt.line, got, tt.want)
		}
	}
}

// TestParseLineAnyBytes: whatever a line holds (tokens in any order, or an
// object of a message's members and others, of any value), parseLine
// returns a message or an error, never both or neither, and a message it
// returns, encoded again, is read back the same.
func TestParseLineAnyBytes(t *testing.T) {
	anyValue := rapid.SampledFrom([]string{`"s"`, `""`, `null`, `true`, `-2.5`, `{}`, `[]`, `{"a":[1,{"b":null}],"c":"\"]"}`})
	values := map[string]*rapid.Generator[string]{
		`"jsonrpc"`: rapid.SampledFrom([]string{`"2.0"`, `"2.0"`, `"2.0"`, `"1.0"`, `2`}),
		`"id"`:      rapid.SampledFrom([]string{`1`, `-3`, `"a"`, `"\u0041"`, `""`, `null`, `1.5`, `9007199254740993`, `{}`}),
		`"method"`:  rapid.SampledFrom([]string{`"tools/call"`, `"ping"`, `"\u0074ools/list"`, `""`, `1`}),
		`"error"`:   rapid.SampledFrom([]string{`{"code":1,"message":"m"}`, `{"code":-32601,"message":"x","data":{"d":[]}}`, `{"code":"x"}`, `null`, `"e"`}),
	}
	key := rapid.SampledFrom([]string{`"id"`, `"method"`, `"params"`, `"result"`, `"error"`, `"Method"`, `"x"`})
	token := rapid.SampledFrom([]string{`{`, `}`, `[`, `]`, `:`, `,`, ` `, `"`, `\`, `"jsonrpc"`, `"2.0"`, `"id"`, `"method"`, `1`, `null`, `{}`})
	accepted := 0
	rapid.Check(t, func(t *rapid.T) {
		var line string
		if rapid.IntRange(0, 3).Draw(t, "shape") == 0 {
			line = strings.Join(rapid.SliceOf(token).Draw(t, "tokens"), "")
		} else {
			keys := rapid.SliceOfNDistinct(key, 0, 5, rapid.ID[string]).Draw(t, "keys")
			if rapid.IntRange(0, 4).Draw(t, "no version") > 0 {
				keys = append([]string{`"jsonrpc"`}, keys...)
			}
			members := make([]string, len(keys))
			for i, k := range keys {
				v := values[k]
				if v == nil {
					v = anyValue
				}
				members[i] = k + ":" + v.Draw(t, k)
			}
			line = "{" + strings.Join(members, ",") + "}"
		}
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '[' {
			return // decode's: a blank line is skipped, a batch refused
		}
		msg, bad := parseLine([]byte(line))
		if (msg == nil) == (bad == nil) {
			t.Fatalf("%q: message %v and error %v", line, msg, bad)
		}
		if msg == nil {
			return
		}
		accepted++
		b, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		again, bad := parseLine(b)
		if bad != nil || !reflect.DeepEqual(again, msg) {
			t.Fatalf("%q: read as %#v, encoded %s, read back as %#v, %v", line, msg, b, again, bad)
		}
	})
	if accepted == 0 {
		t.Error("no line was a message: the generator makes none")
	}
}
