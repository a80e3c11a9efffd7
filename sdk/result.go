package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolhost/toolhost"
)

// Text returns a successful result whose stdout is s.
func Text(s string) *Result { return &Result{OK: true, Stdout: s} }

// JSON returns a successful result whose stdout is v encoded as indented JSON.
func JSON(v any) (*Result, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "sdk: encode result: %w", err)
	}
	return Text(string(b)), nil
}

// Structured returns a successful result carrying v (which encodes as a
// JSON object) as structured content and as indented JSON in its stdout;
// [NewStructuredTool]'s tools return it.
func Structured(v any) (*Result, error) {
	res, err := JSON(v)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &obj); err != nil || obj == nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "sdk: structured content must be a JSON object, not %.40s", res.Stdout)
	}
	res.Meta = map[string]any{toolhost.MetaStructuredContent: obj}
	return res, nil
}

// Errorf returns an error with a code. A handler returning it fails the call
// with that code and message; any other error fails it with tool_exec.
func Errorf(code Code, format string, args ...any) error {
	return toolhost.Errorf(code, format, args...)
}

// Fail marks res as failed with the code and a formatted message, keeping its
// output (stdout, stderr, exit code), and returns it. Use it when a failed
// tool has output worth returning, such as a command that exited non-zero.
func Fail(res *Result, code Code, format string, args ...any) *Result {
	res.OK = false
	res.Error = &ErrorInfo{Code: code, Message: fmt.Sprintf(format, args...)}
	if res.ExitCode == 0 {
		res.ExitCode = 1
	}
	return res
}

// DecodeConfig decodes a plugin block's config {} into v (a pointer to a
// struct) strictly: an unknown key or a wrong type is a validation error
// naming it, so a typo in config.hcl stops the plugin instead of being ignored.
func DecodeConfig(req *ConfigureRequest, v any) error {
	dec := json.NewDecoder(bytes.NewReader(req.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(CodeValidation, "config: %v", err)
	}
	return nil
}
