package redact_test

import (
	"fmt"

	"github.com/toolhost/toolhost/redact"
)

func ExampleString() {
	out, changed := redact.String(`export OPENAI_API_KEY=sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNp
curl -H "Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543" https://api.example.com
git clone https://deploy:Tr0ub4dor3@git.example.com/app.git`)
	fmt.Println(out)
	fmt.Println(changed)
	// Output:
	// export OPENAI_API_KEY=***REDACTED***
	// curl -H "Authorization: Bearer ***REDACTED***" https://api.example.com
	// git clone https://deploy:***REDACTED***@git.example.com/app.git
	// true
}

func ExampleJSON() {
	out, changed := redact.JSON([]byte(`{"tool": "http", "headers": {"X-Api-Key": "k-8f14e45f", "Accept": "*/*"}}`))
	fmt.Println(string(out), changed)
	// Output:
	// {"headers":{"Accept":"*/*","X-Api-Key":"***REDACTED***"},"tool":"http"} true
}
