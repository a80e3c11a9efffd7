package redact

import (
	"strings"
	"testing"
)

// A fixture is text holding secrets that String must hide wherever the text
// stands on lines of its own.
type fixture struct {
	text    string
	secrets []string
}

// literal is a fixture that is a secret itself.
func literal(secret string) fixture { return fixture{secret, []string{secret}} }

// pemBody returns the lines of a PEM block between its BEGIN and END lines.
func pemBody(block string) []string {
	lines := strings.Split(block, "\n")
	return lines[1 : len(lines)-1]
}

var fixtures = []fixture{
	literal(openAIKey),
	literal(anthropicKey),
	literal(githubPAT),
	literal(githubFine),
	literal(githubApp),
	literal(awsKeyID),
	literal(slackBot),
	literal(googleKey),
	literal(stripeKey),
	literal(jwtToken),
	{rsaKey, pemBody(rsaKey)},
	{sshKey, pemBody(sshKey)},
	{"export DB_PASSWORD=hunter2-but-much-longer", []string{"hunter2-but-much-longer"}},
	{`"client_secret": "GOCSPX-abcDEF123456"`, []string{"GOCSPX-abcDEF123456"}},
	{"aws_secret_access_key = " + awsSecret, []string{awsSecret}},
	{"> Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543", []string{"8f14e45fceea167a5a36dedd4bea2543"}},
	{"Authorization: Basic Y2ktYm90Omh1bnRlcjItbG9uZ2Vy", []string{"Y2ktYm90Omh1bnRlcjItbG9uZ2Vy"}},
	{"https://deploy:Tr0ub4dor-and-3@git.example.com/x.git", []string{"Tr0ub4dor-and-3"}},
	{"client = OpenAI(api_key='x9Y8z7W6v5u4t3s2r1')", []string{"x9Y8z7W6v5u4t3s2r1"}},
	{"curl -H 'X-Auth-Token: 5f4dcc3b5aa765d61d8327deb882cf99' https://api", []string{"5f4dcc3b5aa765d61d8327deb882cf99"}},
}

// separators set a fixture apart from the text around it, as a word or as
// lines of its own.
var separators = []string{"\n", " ", "\t"}

// FuzzString embeds a fixture at a fuzzed position of fuzzed text, set apart
// by a separator, and checks that String does not panic, is idempotent, and
// leaves no part of the fixture's secrets visible: no 12-byte window of a
// secret appears in the output unless the surrounding text holds it.
func FuzzString(f *testing.F) {
	for k, tc := range cases {
		f.Add(tc.in, uint(k*7), uint8(k), uint8(k))
	}
	f.Fuzz(func(t *testing.T, text string, pos uint, which, sep uint8) {
		if out, changed := String(text); changed {
			if again, changed := String(out); again != out || changed {
				t.Fatalf("not idempotent: String(%q) = %q, then %q, %v", text, out, again, changed)
			}
		}
		fx := fixtures[int(which)%len(fixtures)]
		p := int(pos % uint(len(text)+1))
		before, after := text[:p], text[p:]
		sp := separators[int(sep)%len(separators)]
		in := before + sp + fx.text + sp + after
		out, changed := String(in)
		if !changed {
			t.Fatalf("String(%q) replaced nothing", in)
		}
		if again, changed := String(out); again != out || changed {
			t.Fatalf("not idempotent: String(%q) = %q, then %q, %v", in, out, again, changed)
		}
		for _, secret := range fx.secrets {
			for k := 0; k+12 <= len(secret); k++ {
				w := secret[k : k+12]
				if strings.Contains(out, w) && !strings.Contains(before, w) && !strings.Contains(after, w) {
					t.Fatalf("String(%q) = %q shows %q of secret %q", in, out, w, secret)
				}
			}
		}
	})
}
