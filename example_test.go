package toolhost_test

import (
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
