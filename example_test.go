package toolhost_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/toolhost/toolhost"
)

// An error with a stable code keeps it through wrapping: errors.Is matches
// the code's sentinel, CodeOf reads it, and ErrorResult turns it into the
// failed result a caller sees.
func ExampleErrorf() {
	_, cause := os.Open("/no/such/notes.txt")
	err := fmt.Errorf("notes: %w", toolhost.Errorf(toolhost.CodeToolExec, "reading the notes: %w", cause))

	fmt.Println(errors.Is(err, toolhost.ErrToolExec), errors.Is(err, toolhost.ErrPolicy), errors.Is(err, os.ErrNotExist))
	fmt.Println(toolhost.CodeOf(err))
	res := toolhost.ErrorResult(err)
	fmt.Println(res.OK, res.Error.Code, res.Error.Message)
	// Output:
	// true false true
	// tool_exec
	// false tool_exec notes: reading the notes: open /no/such/notes.txt: no such file or directory
}

// A group spec is checked against the protocol's limits before the host
// registers it.
func ExampleGroupSpec_Validate() {
	spec := &toolhost.GroupSpec{ID: "notes", Tools: []toolhost.ToolSpec{
		{Name: "add_note", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "Add-Note", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}}
	err := spec.Validate()
	fmt.Println(toolhost.CodeOf(err), err)
	fmt.Println(toolhost.IsReserved("workspace"), toolhost.IsReserved("notes"))
	// Output:
	// invalid_group_def group notes: tool name "Add-Note" does not match ^[a-z][a-z0-9_]{0,63}$
	// true false
}
