// Package tokencount counts tokens as a model does: the o200k_base BPE,
// loaded from the tokenizer's embedded files (no network). The host counts
// a role's tool definitions with it, the agent runtime an agent's context.
package tokencount

import (
	"encoding/json"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

var (
	encOnce sync.Once
	enc     *tiktoken.Tiktoken
	encErr  error
)

// Count counts the tokens of s.
func Count(s string) (int, error) {
	encOnce.Do(func() {
		tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
		enc, encErr = tiktoken.GetEncoding("o200k_base")
	})
	if encErr != nil {
		return 0, encErr
	}
	return len(enc.Encode(s, nil, nil)), nil
}

// JSON counts the tokens of v encoded as JSON, as a model request carries
// it (tool definitions, say); 0 when it cannot be counted.
func JSON(v any) int {
	b, _ := json.Marshal(v)
	n, _ := Count(string(b))
	return n
}
