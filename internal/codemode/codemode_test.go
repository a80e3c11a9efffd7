package codemode

import (
	"encoding/json"
	"testing"
)

func TestFunctions(t *testing.T) {
	got := Functions([]string{"read_file", "fs.read", "fs-read", "web-get", "9lives", "len", "load", "parallel", "result", "print"})
	want := map[string]string{"read_file": "read_file", "web_get": "web-get", "_9lives": "9lives"}
	if len(got) != len(want) {
		t.Fatalf("Functions = %v, want %v", got, want)
	}
	for fn, tool := range want {
		if got[fn] != tool {
			t.Errorf("%s = %q, want %q (all: %v)", fn, got[fn], tool, got)
		}
	}
}

func TestDescribe(t *testing.T) {
	defs := []Def{
		{Name: "read_file", Parameters: json.RawMessage(`{"type":"object","properties":{"offset":{"type":"integer"},"path":{"type":"string"},"all":{"type":["boolean","null"]}},"required":["path"]}`)},
		{Name: "len", Parameters: json.RawMessage(`{"type":"object","properties":{"of":{"type":"string"}},"required":["of"]}`)},
		{Name: "ping", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	want := "Base.\nFunctions:\nread_file(path: str, all: bool|None = None, offset: int = None)\ncall(\"len\", of: str)\nping()"
	if got := Describe("Base.", defs); got != want {
		t.Errorf("Describe =\n%s\nwant\n%s", got, want)
	}
	if got := Describe("Base.", nil); got != "Base.\nNo tool is yours to call at the moment." {
		t.Errorf("no tools: %q", got)
	}
}
