package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"pgregory.net/rapid"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// scalarGen draws the values the writer encodes itself: strings (any bytes,
// so invalid UTF-8, control and HTML characters too), booleans, nil,
// floats of both sizes (of every magnitude, and now and then NaN or an
// infinity, which json.Marshal refuses) and integers.
func scalarGen() *rapid.Generator[any] {
	return rapid.OneOf(
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) any { return string(b) }),
		rapid.Map(rapid.SampledFrom([]string{"<a&b>", "\u2028\u2029", "\x00\x1f\x7f", "\"\\/", "\xff\xfe", "é\xe2\x82"}), func(s string) any { return s }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.Float32(), func(f float32) any { return f }),
		rapid.Map(rapid.Float64Range(-1e-5, 1e-5), func(f float64) any { return f }),
		rapid.Map(rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1e21, 1e20, 1e-6, 1e-7, 123456789e-15, math.NaN(), math.Inf(1)}), func(f float64) any { return f }),
		rapid.Map(rapid.Int(), func(i int) any { return i }),
		rapid.Map(rapid.Int64(), func(i int64) any { return i }),
		rapid.Map(rapid.Int32(), func(i int32) any { return i }),
		rapid.Map(rapid.Uint64(), func(i uint64) any { return i }),
		rapid.Map(rapid.Uint32(), func(i uint32) any { return i }),
		rapid.Map(rapid.Uint(), func(i uint) any { return i }),
	)
}

// TestAppendPayloadIsJSONMarshal: the writer's own encoding of a payload is
// byte for byte what json.Marshal makes of it (or, when json.Marshal fails,
// the same encode_error object), for flat payloads of every value it
// encodes itself and for payloads holding anything else (nested maps and
// lists, json.Number), which it hands to json.Marshal.
func TestAppendPayloadIsJSONMarshal(t *testing.T) {
	value := rapid.OneOf(scalarGen(),
		rapid.Map(rapid.MapOf(rapid.String(), scalarGen()), func(m map[string]any) any { return m }),
		rapid.Map(rapid.SliceOf(rapid.Int()), func(s []int) any { return s }),
		rapid.Map(rapid.IntRange(0, 1000), func(i int) any { return json.Number(strings.Repeat("1", i%5+1)) }),
	)
	var b batchBuf
	rapid.Check(t, func(t *rapid.T) {
		var p map[string]any
		if !rapid.Bool().Draw(t, "nil") {
			p = rapid.MapOf(rapid.String(), rapid.OneOf(scalarGen(), scalarGen(), value)).Draw(t, "payload")
		}
		prefix := rapid.SliceOf(rapid.Byte()).Draw(t, "prefix")
		got := b.appendPayload(slices.Clone(prefix), p)
		want := append(slices.Clone(prefix), marshalPayload(p)...)
		if p == nil {
			want = append(slices.Clone(prefix), "{}"...)
		}
		if string(got) != string(want) {
			t.Fatalf("appendPayload(%#v)\n got %q\nwant %q", p, got, want)
		}
	})
}

// TestCleanText: text without NUL and invalid UTF-8 is kept as it is (the
// same string, not a copy); other text has each NUL and each invalid byte
// replaced by U+FFFD, and is valid UTF-8 without NUL afterwards.
func TestCleanText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := string(rapid.SliceOf(rapid.Byte()).Draw(t, "s"))
		got := cleanText(s)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("cleanText(%q) = %q: invalid UTF-8 or NUL left", s, got)
		}
		if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && got != s {
			t.Fatalf("cleanText(%q) = %q, want it unchanged", s, got)
		}
		if want := strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD"); got != want {
			t.Fatalf("cleanText(%q) = %q, want %q", s, got, want)
		}
	})
}

// TestHostileTextDoesNotLoseOtherEvents is the attack on the audit trail: a
// caller chooses a call id and a tool name with a NUL byte and invalid
// UTF-8, which PostgreSQL's text cannot hold. Its events share a batch with
// other calls' events; were they written as they are, the whole batch
// would fail and be dropped, the other calls' events with it (an agent
// erasing the record of what it did). Every event is written, on both
// engines, the hostile text cleaned the same way.
func TestHostileTextDoesNotLoseOtherEvents(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		w := s.NewEventWriter(&WriterOptions{linger: time.Second}) // one batch
		w.Emit(Event{Type: EventCallStarted, CallID: "call_before", Tool: "run_command"})
		w.Emit(Event{Type: EventCallStarted, CallID: "x\x00y", Tool: "t\xffool", AgentID: "a\x00", Payload: map[string]any{"arguments": "nul \x00 here"}})
		w.Emit(Event{Type: EventCallCompleted, CallID: "call_before", Tool: "run_command"})
		if err := w.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		got, err := s.Events(context.Background(), EventFilter{first: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || w.failed() != 0 {
			t.Fatalf("%d events written, %d lost; want 3, 0: %+v", len(got), w.failed(), got)
		}
		h := got[1]
		if h.CallID != "x\uFFFDy" || h.Tool != "t\uFFFDool" || h.AgentID != "a\uFFFD" || h.Payload["arguments"] != "nul \x00 here" {
			t.Fatalf("the hostile event was stored as %+v", h)
		}
		if got[0].CallID != "call_before" || got[2].Type != EventCallCompleted {
			t.Fatalf("the other events: %+v, %+v", got[0], got[2])
		}
	})
}

// TestCopyAfterAFailedCopy: copyEvents sends a batch in one write, then
// reads the server's answers itself. After a batch the server refuses, it
// must have read them all, so that its connection serves the next batch and
// the next query.
func TestCopyAfterAFailedCopy(t *testing.T) {
	ctx := context.Background()
	s := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: pgtest.Start(t)})
	s.sqlDB.SetMaxOpenConns(1) // one connection, used by every step
	var b batchBuf
	e := Event{Time: time.Now(), Type: EventCallStarted, CallID: "call_1", Tool: "noop", Payload: map[string]any{"arguments": "{}"}}
	bad := b.appendCopyMessages(nil, []Event{e, e}, "events")
	at := bytes.Index(bad, []byte(copyHeader)) + len(copyHeader)
	binary.BigEndian.PutUint16(bad[at:], 3) // the first row says it has 3 fields
	var pe *pgconn.PgError
	if err := (postgres{}).copyEvents(ctx, s.sqlDB, bad); !errors.As(err, &pe) || pe.Code != "22P04" {
		t.Fatalf("a malformed batch: %v, want bad_copy_file_format (22P04)", err)
	}
	for i := range 2 {
		e.CallID = fmt.Sprintf("call_%d", i+2)
		if err := (postgres{}).copyEvents(ctx, s.sqlDB, b.appendCopyMessages(nil, []Event{e}, "events")); err != nil {
			t.Fatalf("batch %d after the failed one: %v", i+1, err)
		}
	}
	got, err := s.Events(ctx, EventFilter{first: true})
	if err != nil || len(got) != 2 || got[0].CallID != "call_2" || got[1].CallID != "call_3" {
		t.Fatalf("Events = %+v, %v; want call_2 and call_3 only", got, err)
	}
}
