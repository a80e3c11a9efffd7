package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"pgregory.net/rapid"
)

// TestDecodeMessageAsSDK: decodeMessage, which lineConn decodes each line
// with, gives what jsonrpc.DecodeMessage gives, message or error, for lines
// a client may send: any mix of the message's keys in any case, ids of
// every JSON kind, methods that are no string, nesting past the bound,
// bytes that are not JSON.
func TestDecodeMessageAsSDK(t *testing.T) {
	value := genJSON(3)
	keys := []string{"jsonrpc", "JSONRPC", "Jsonrpc", "id", "ID", "Id", "method", "Method", "params", "Params", "result", "error", "other"}
	special := map[string]*rapid.Generator[string]{
		"jsonrpc": rapid.SampledFrom([]string{`"2.0"`, `"2.0"`, `"1.0"`, `2`, `null`, `""`}),
		"id":      rapid.SampledFrom([]string{`1`, `-7`, `1.5`, `1e3`, `"a"`, `""`, `null`, `true`, `{}`, `[1]`, `18446744073709551616`}),
		"method":  rapid.SampledFrom([]string{`"tools/call"`, `""`, `"ping"`, `1`, `null`, `{}`, `"\u0074ools/list"`}),
		"error":   rapid.SampledFrom([]string{`{"code":-32600,"message":"x"}`, `{"code":"x"}`, `null`, `{}`, `"e"`}),
	}
	rapid.Check(t, func(t *rapid.T) {
		var line string
		switch rapid.IntRange(0, 9).Draw(t, "shape") {
		case 0: // any bytes
			line = rapid.StringOf(rapid.SampledFrom([]rune(`{}[]":,0123456789.-eE ntrufalsx\`))).Draw(t, "bytes")
		case 1: // too deep
			n := rapid.IntRange(maxDepth-2, maxDepth+2).Draw(t, "depth")
			line = `{"jsonrpc":"2.0","id":1,"method":"m","params":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
		default:
			var fields []string
			for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom(keys), 0, 6, rapid.ID[string]).Draw(t, "keys") {
				v := special[k]
				if v == nil || rapid.IntRange(0, 4).Draw(t, "any "+k) == 0 {
					v = value
				}
				fields = append(fields, `"`+k+`":`+v.Draw(t, k))
			}
			line = "{" + strings.Join(fields, ",") + "}"
			if rapid.IntRange(0, 9).Draw(t, "trailing") == 0 {
				line += rapid.SampledFrom([]string{" x", "}", " {}"}).Draw(t, "tail")
			}
		}
		got, gotErr := decodeMessage([]byte(line))
		want, wantErr := jsonrpc.DecodeMessage([]byte(line))
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n ours %#v, %v\n sdk  %#v, %v", line, got, gotErr, want, wantErr)
		}
	})
}

// genJSON generates JSON values nested up to depth.
func genJSON(depth int) *rapid.Generator[string] {
	leaf := rapid.SampledFrom([]string{`null`, `true`, `0`, `-1.25`, `"s"`, `"\"q\\\\"`, `"[{"`, `{}`, `[]`})
	if depth == 0 {
		return leaf
	}
	inner := genJSON(depth - 1)
	return rapid.Custom(func(t *rapid.T) string {
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			return leaf.Draw(t, "leaf")
		case 1:
			return "[" + strings.Join(rapid.SliceOfN(inner, 0, 3).Draw(t, "items"), ",") + "]"
		}
		var fields []string
		for i, v := range rapid.SliceOfN(inner, 0, 3).Draw(t, "values") {
			k, _ := json.Marshal(string(rune('a' + i)))
			fields = append(fields, string(k)+":"+v)
		}
		return "{" + strings.Join(fields, ",") + "}"
	})
}
