package redact

import (
	"strings"
	"testing"
)

// Realistic-looking secrets. None is real.
const (
	openAIKey    = "sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNpA1sD4fG7hJ0kL"
	anthropicKey = "sk-ant-api03-R2D2C3POr2d2c3poR2D2C3PO-AbCdEfGh_IjKlMnOp"
	githubPAT    = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
	githubFine   = "github_pat_11ABCDEFG0123456789abcd_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456"
	githubApp    = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
	awsKeyID     = "AKIAIOSFODNN7EXAMPLE"
	awsSecret    = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	slackBot     = "xoxb-2048-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	googleKey    = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
	stripeKey    = "sk_live_51H8aBcDeFgHiJkLmNoPqRsT"
	toolhostKey  = "thk_q8Vd3LxT0aZ7bN2mK5pR9sW4yH6jC1fE3gU8iO0lA7e"
	jwtToken     = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	rsaKey       = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2mN0aQj6T2s0dV7p3uV2GfQpYlZp\nq1w2e3r4t5y6u7i8o9p0a1s2d3f4g5h6j7k8l9z0x1c2v3b4n5m6Q7W8E9R0T1Y2\n-----END RSA PRIVATE KEY-----"
	sshKey       = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDkXWzXm0a0pLqQ8bC3z9o2e0Jq3fV5n6s8t7u1v2w3xAAAAJgAAAAA\n-----END OPENSSH PRIVATE KEY-----"
)

type testCase struct {
	name, in, want string
}

// cases are shared with FuzzString as seeds.
var cases = []testCase{
	// Fixtures with secrets.
	{".env file",
		"# database\nDB_HOST=localhost\nDB_PORT=5432\nDB_PASSWORD=s3cr3t-P@ss!\nOPENAI_API_KEY=" + openAIKey + "\nSTRIPE_SECRET=" + stripeKey + "\nDEBUG=true\nSESSION_SECRET=\"correct horse battery staple\"\nSENTRY_DSN=https://public@o0.ingest.sentry.io/1\n",
		"# database\nDB_HOST=localhost\nDB_PORT=5432\nDB_PASSWORD=***REDACTED***\nOPENAI_API_KEY=***REDACTED***\nSTRIPE_SECRET=***REDACTED***\nDEBUG=true\nSESSION_SECRET=\"***REDACTED***\"\nSENTRY_DSN=https://public@o0.ingest.sentry.io/1\n"},
	{"printenv output",
		"SHELL=/bin/bash\nPWD=/home/dev/project\nGITHUB_TOKEN=" + githubPAT + "\nAWS_ACCESS_KEY_ID=" + awsKeyID + "\nAWS_SECRET_ACCESS_KEY=" + awsSecret + "\nHOME=/home/dev\nOLDPWD=/home/dev\nLS_COLORS=rs=0:di=01;34:ln=01;36\nSSH_AUTH_SOCK=/run/user/1000/keyring/ssh\n_=/usr/bin/printenv\n",
		"SHELL=/bin/bash\nPWD=/home/dev/project\nGITHUB_TOKEN=***REDACTED***\nAWS_ACCESS_KEY_ID=***REDACTED***\nAWS_SECRET_ACCESS_KEY=***REDACTED***\nHOME=/home/dev\nOLDPWD=/home/dev\nLS_COLORS=rs=0:di=01;34:ln=01;36\nSSH_AUTH_SOCK=/run/user/1000/keyring/ssh\n_=/usr/bin/printenv\n"},
	{"export statements",
		"export ANTHROPIC_API_KEY='" + anthropicKey + "'\nexport NPM_TOKEN=npm_h7GkX2pQ9rT4vW8yZ1bC3dF5\nexport PATH=$HOME/go/bin:$PATH\n",
		"export ANTHROPIC_API_KEY='***REDACTED***'\nexport NPM_TOKEN=***REDACTED***\nexport PATH=$HOME/go/bin:$PATH\n"},
	{"powershell",
		`$env:OPENAI_API_KEY = "` + openAIKey + `"`,
		`$env:OPENAI_API_KEY = "***REDACTED***"`},
	{"curl -v HTTP/1.1",
		"*   Trying 140.82.112.6:443...\n* Connected to api.github.com (140.82.112.6) port 443\n> GET /user HTTP/1.1\n> Host: api.github.com\n> User-Agent: curl/8.5.0\n> Accept: */*\n> Authorization: Bearer " + githubPAT + "\n>\n< HTTP/1.1 200 OK\n< Content-Type: application/json; charset=utf-8\n< X-RateLimit-Remaining: 4999\n",
		"*   Trying 140.82.112.6:443...\n* Connected to api.github.com (140.82.112.6) port 443\n> GET /user HTTP/1.1\n> Host: api.github.com\n> User-Agent: curl/8.5.0\n> Accept: */*\n> Authorization: Bearer ***REDACTED***\n>\n< HTTP/1.1 200 OK\n< Content-Type: application/json; charset=utf-8\n< X-RateLimit-Remaining: 4999\n"},
	{"curl -v HTTP/2 basic auth",
		"> GET /v2/ HTTP/2\n> host: registry.example.com\n> authorization: Basic Y2ktYm90Omh1bnRlcjI=\n> x-api-key: 9f8e7d6c5b4a\n",
		"> GET /v2/ HTTP/2\n> host: registry.example.com\n> authorization: Basic ***REDACTED***\n> x-api-key: ***REDACTED***\n"},
	{"curl command line",
		`curl -sS -H "Authorization: token ` + githubApp + `" -H 'Accept: application/vnd.github+json' https://api.github.com/repos/o/r`,
		`curl -sS -H "Authorization: token ***REDACTED***" -H 'Accept: application/vnd.github+json' https://api.github.com/repos/o/r`},
	{"git remote -v",
		"origin\thttps://x-access-token:" + githubApp + "@github.com/acme/api.git (fetch)\norigin\thttps://x-access-token:" + githubApp + "@github.com/acme/api.git (push)\nmirror\thttps://oauth2:glpat-Xy7Zq9Rt2Vw4Bn6Mk8Lp@gitlab.com/acme/api.git (fetch)\nupstream\tgit@github.com:acme/api.git (fetch)\n",
		"origin\thttps://x-access-token:***REDACTED***@github.com/acme/api.git (fetch)\norigin\thttps://x-access-token:***REDACTED***@github.com/acme/api.git (push)\nmirror\thttps://oauth2:***REDACTED***@gitlab.com/acme/api.git (fetch)\nupstream\tgit@github.com:acme/api.git (fetch)\n"},
	{"database URLs",
		"DATABASE_URL=postgres://app:pa55w0rd@db.internal:5432/app?sslmode=disable\nredis://:p@ss@cache:6379/0\nmongodb+srv://admin:Tr0ub4dor@cluster0.mongodb.net/test",
		"DATABASE_URL=postgres://app:***REDACTED***@db.internal:5432/app?sslmode=disable\nredis://:***REDACTED***@cache:6379/0\nmongodb+srv://admin:***REDACTED***@cluster0.mongodb.net/test"},
	{"aws credentials file",
		"[default]\naws_access_key_id = " + awsKeyID + "\naws_secret_access_key = " + awsSecret + "\nregion = eu-west-1\n\n[ci]\naws_access_key_id=ASIAY34FZKBOKMUTVV7A\naws_secret_access_key=9drTJvcXLB89EXAMPLELB8923FB892xMFI\naws_session_token=IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ==\n",
		"[default]\naws_access_key_id = ***REDACTED***\naws_secret_access_key = ***REDACTED***\nregion = eu-west-1\n\n[ci]\naws_access_key_id=***REDACTED***\naws_secret_access_key=***REDACTED***\naws_session_token=***REDACTED***\n"},
	{"kubeconfig",
		"apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ==\n- name: ci\n  user:\n    token: " + jwtToken + "\n",
		"apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n    client-key-data: ***REDACTED***\n- name: ci\n  user:\n    token: ***REDACTED***\n"},
	{"json config",
		`{"client_id": "1234.apps.example.com", "client_secret": "GOCSPX-abcDEF123", "refresh_token": "1//0gLx-abc", "expires_in": 3599, "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----\n"}`,
		`{"client_id": "1234.apps.example.com", "client_secret": "***REDACTED***", "refresh_token": "***REDACTED***", "expires_in": 3599, "private_key": "***REDACTED***"}`},
	{"escaped newlines in a log line",
		`{"stdout":"user=bob\npassword=hunter2\ttoken=abc123\r\n"}`,
		`{"stdout":"user=bob\npassword=***REDACTED***\ttoken=***REDACTED***\r\n"}`},
	{"escaped json in a log line",
		`{"level":"debug","msg":"request","body":"{\"api_key\":\"a1b2c3d4e5\",\"query\":\"go\"}"}`,
		`{"level":"debug","msg":"request","body":"{\"api_key\":\"***REDACTED***\",\"query\":\"go\"}"}`},
	{"docker login",
		"$ echo \"$REGISTRY_PASSWORD\" | docker login -u ci-bot --password-stdin registry.example.com\nWARNING! Your password will be stored unencrypted in /home/ci/.docker/config.json.\nLogin Succeeded\n$ cat ~/.docker/config.json\n{\n\t\"auths\": {\n\t\t\"registry.example.com\": {\n\t\t\t\"auth\": \"Y2ktYm90Omh1bnRlcjI=\"\n\t\t}\n\t}\n}\n",
		"$ echo \"$REGISTRY_PASSWORD\" | docker login -u ci-bot --password-stdin registry.example.com\nWARNING! Your password will be stored unencrypted in /home/ci/.docker/config.json.\nLogin Succeeded\n$ cat ~/.docker/config.json\n{\n\t\"auths\": {\n\t\t\"registry.example.com\": {\n\t\t\t\"auth\": \"***REDACTED***\"\n\t\t}\n\t}\n}\n"},
	{"RSA private key", "$ cat deploy.pem\n" + rsaKey + "\n$ ls\n", "$ cat deploy.pem\n***REDACTED***\n$ ls\n"},
	{"OPENSSH private key", "id_ed25519:\n" + sshKey + "\nid_ed25519.pub: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMq dev@laptop\n", "id_ed25519:\n***REDACTED***\nid_ed25519.pub: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMq dev@laptop\n"},
	{"unterminated private key", "key:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oKQl\n[output truncated]", "key:\n***REDACTED***"},
	{"private key in a value", "TLS_KEY=-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\n-----END PRIVATE KEY-----\\n done", "TLS_KEY=***REDACTED***\\n done"},
	{"jwt in a log line",
		"2025-03-14T09:12:03Z WARN auth: token rejected jwt=" + jwtToken + " reason=expired",
		"2025-03-14T09:12:03Z WARN auth: token rejected jwt=***REDACTED*** reason=expired"},
	{"github tokens in gh output",
		"github.com\n  ✓ Logged in to github.com account octocat (keyring)\n  - Token: " + githubPAT + "\n  - Fine-grained: " + githubFine + ".\n",
		"github.com\n  ✓ Logged in to github.com account octocat (keyring)\n  - Token: ***REDACTED***\n  - Fine-grained: ***REDACTED***.\n"},
	{"slack tokens",
		"slack:\n  bot_token: " + slackBot + "\n  webhook: https://hooks.slack.com/services/T000/B000/XXXX\nusing xoxp-1234567890-0987654321-abcdef for the user",
		"slack:\n  bot_token: ***REDACTED***\n  webhook: https://hooks.slack.com/services/T000/B000/XXXX\nusing ***REDACTED*** for the user"},
	{"python traceback",
		"Traceback (most recent call last):\n  File \"/app/main.py\", line 12, in <module>\n    client = Anthropic(api_key='" + anthropicKey + "')\n  File \"/app/client.py\", line 88, in __init__\n    raise AuthError(\"invalid key\", api_key=api_key)\nAuthError: ('invalid key', 'api_key=x9Y8z7W6v5')\n",
		"Traceback (most recent call last):\n  File \"/app/main.py\", line 12, in <module>\n    client = Anthropic(api_key='***REDACTED***')\n  File \"/app/client.py\", line 88, in __init__\n    raise AuthError(\"invalid key\", api_key=***REDACTED***)\nAuthError: ('invalid key', 'api_key=***REDACTED***')\n"},
	{"python dict and ruby hash",
		"{'user': 'bob', 'password': 'hunter2'}\n{ 'api_key' => 'abc123', :region => 'us' }",
		"{'user': 'bob', 'password': '***REDACTED***'}\n{ 'api_key' => '***REDACTED***', :region => 'us' }"},
	{"google api key in a url",
		"GET https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key=" + googleKey + " 200",
		"GET https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key=***REDACTED*** 200"},
	{"oauth callback query",
		"GET /callback?code=4/0AX4XfWh&state=xyz&access_token=ya29.a0AfH6SMB&token_type=Bearer&expires_in=3599 HTTP/1.1",
		"GET /callback?code=4/0AX4XfWh&state=xyz&access_token=***REDACTED***&token_type=Bearer&expires_in=3599 HTTP/1.1"},
	{"yaml secrets",
		"database:\n  user: app\n  password: hunter2hunter2\n  passwd: \"qwerty\"\nspring.datasource.password=changeit\n",
		"database:\n  user: app\n  password: ***REDACTED***\n  passwd: \"***REDACTED***\"\nspring.datasource.password=***REDACTED***\n"},
	{"cli flags and headers",
		"$ mytool --password=hunter2 --api-key=0123abcd --verbose\nX-Auth-Token: 5f4dcc3b5aa765d61d8327deb882cf99\nCookie: session_token=abc123; theme=dark\n",
		"$ mytool --password=***REDACTED*** --api-key=***REDACTED*** --verbose\nX-Auth-Token: ***REDACTED***\nCookie: session_token=***REDACTED***; theme=dark\n"},
	{"npmrc and libpq",
		"//npm.example.com/:_authToken=npm_h7GkX2pQ9rT4vW8yZ1bC3dF5\n$ PGPASSWORD=Tr0ub4dor psql -h db -U app\n",
		"//npm.example.com/:_authToken=***REDACTED***\n$ PGPASSWORD=***REDACTED*** psql -h db -U app\n"},
	{"standalone bearer",
		`level=info msg="calling upstream with Bearer 8f14e45fceea167a5a36dedd4bea2543"`,
		`level=info msg="calling upstream with Bearer ***REDACTED***"`},
	{"hardcoded key in go source",
		"const apiKey = \"" + openAIKey + "\"\nvar stripe = \"" + stripeKey + "\"\n",
		"const apiKey = \"***REDACTED***\"\nvar stripe = \"***REDACTED***\"\n"},
	{"code handing a literal over",
		"h := http.Header{\"Authorization\": []string{\"Basic Y2k6aHVudGVy\"}, \"X-Request-Key\": []string{}}\nclient := anthropic.NewClient(option.WithAPIKey(\"" + anthropicKey + "\"))\napi_key = input(\"key> \")",
		"h := http.Header{\"Authorization\": []string{\"***REDACTED***\"}, \"X-Request-Key\": []string{}}\nclient := anthropic.NewClient(option.WithAPIKey(\"***REDACTED***\"))\napi_key = input(\"***REDACTED***\")"},
	{"a toolhost token printed by cat",
		"$ cat data/admin.token\n" + toolhostKey + "\n",
		"$ cat data/admin.token\n***REDACTED***\n"},
	{"authorization in json",
		`{"headers": {"Authorization": "Bearer abc.def.ghi", "Accept": "*/*"}}`,
		`{"headers": {"Authorization": "Bearer ***REDACTED***", "Accept": "*/*"}}`},

	// Negative cases: nothing changes.
	{"prose", "The quick brown fox jumps over the lazy dog. Bearer bonds were once common; the bearer of this letter is trusted.", ""},
	{"token as a word", "the next token is an identifier; the tokenizer splits text into tokens\n--- PASS: TestToken (0.00s)\nsyntax error: unexpected token in expression", ""},
	{"empty values", "API_KEY=\nDB_PASSWORD=   \nexport GITHUB_TOKEN=\npassword:\n\"secret\": \"\",\n", ""},
	{"sha-256 digest", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  go1.26.8.linux-amd64.tar.gz", ""},
	{"uuid", "request_id=3f2b8c4e-9d1a-4b7f-8e6c-2a5d9f0b1c3e trace=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
	{"sk- words", "pip install scikit-learn  # a.k.a. sk-learn\nrisk-assessment-for-quarterly-planning task-runner-configuration-file-name", ""},
	{"base64 that is not a jwt", "NextToken: eyJNYXJrZXIiOiBudWxsLCAiYm90b190cnVuY2F0ZV9hbW91bnQiOiAxfQ==\ndata: dGhpcyBpcyBub3QgYSBzZWNyZXQ=\neyJhbGciOiJIUzI1NiJ9.e30.sig", ""},
	{"go source reading a key", "apiKey := os.Getenv(\"API_KEY\")\nif apiKey == \"\" {\n\treturn errors.New(\"API_KEY is not set\")\n}\ntoken := os.Getenv(\"GITHUB_TOKEN\")\nreq.Header.Set(\"Authorization\", \"Bearer \"+token)\nsecret, err := loadSecret()\n", ""},
	{"python reading a key", "api_key = os.environ[\"OPENAI_API_KEY\"]\nsecret = os.environ.get(\"APP_SECRET\", None)\npassword = getpass.getpass()\ntoken = None\n", ""},
	{"paths are not names", "open /etc/passwd: permission denied\nparse \"../../etc/passwd\": invalid URI\nC:\\Users\\dev\\token: not found\n", ""},
	{"file paths", "/home/dev/.ssh/id_rsa\n/etc/ssl/private/server.key\n~/.aws/credentials\nC:\\Users\\dev\\secrets\\token.txt\n./config/master.key", ""},
	{"references and placeholders", "API_KEY=${API_KEY}\npassword: ${{ secrets.DB_PASSWORD }}\nGITHUB_TOKEN=$GITHUB_TOKEN\nTOKEN=$(gh auth token)\n\"token\": null,\n\"secret\": {\"name\": \"db\"}", ""},
	{"format slots", "log.Printf(\"token: %s, password=%-8v\", t, p)\nprint(f\"api_key={api_key}\")\nurl := fmt.Sprintf(\"https://%s:%s@%s/\", user, pass, host)", ""},
	{"urls without a password", "git@github.com:acme/api.git\nhttps://git@github.com/acme/api.git\nhttp://localhost:8080/pkg@v1.2.3/x\nmailto:dev@example.com", ""},
	{"certificates and public keys", "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----\n-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n", ""},
	{"token metadata", `{"token_type": "bearer", "expires_in": 3600, "scope": "repo", "tokens": 4096}`, ""},
	{"bearer as a word", "Bearer authentication (also called token authentication) uses Bearer tokens.", ""},
	{"aws-like words", "ASIAN markets; AKIA is a prefix; AIza alone", ""},
	{"already redacted", "OPENAI_API_KEY=***REDACTED***\nAuthorization: Bearer ***REDACTED***\nhttps://u:***REDACTED***@h/\n\"password\": \"***REDACTED***\"", ""},
}

func TestString(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == "" {
				want = tc.in
			}
			got, changed := String(tc.in)
			if got != want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, want)
			}
			if changed != (want != tc.in) {
				t.Errorf("changed = %v, want %v", changed, want != tc.in)
			}
			if again, changed := String(got); again != got || changed {
				t.Errorf("not idempotent: String(%q) = %q, %v", got, again, changed)
			}
		})
	}
}

func TestStringNoAllocationWithoutSecrets(t *testing.T) {
	text := strings.Repeat("2025-03-14T09:12:03Z INFO the next token is an identifier, key=value user=bob path=/srv/app\n", 100)
	if n := testing.AllocsPerRun(10, func() { String(text) }); n != 0 {
		t.Errorf("String allocates %v times on text without secrets", n)
	}
}

func TestIsSecretName(t *testing.T) {
	for _, name := range []string{"token", "TOKEN", "GITHUB_TOKEN", "api_key", "apiKey", "API-KEY", "x-api-key", "db.password", "DB_PASS", "MYSQL_PWD", "passwd", "client_secret", "Authorization", "Proxy-Authorization", "_auth", "BASIC_AUTH", "client-key-data", "--token", "OPENAI_APIKEY"} {
		if !isSecretName(name, false) {
			t.Errorf("isSecretName(%q) = false", name)
		}
	}
	for _, name := range []string{"", "key", "KEY", "PWD", "OLDPWD", "pass", "auth", "monkey", "tokens", "token_type", "secretName", "keyboard", "author", "passport", "sort_keys", "_", "-"} {
		if isSecretName(name, false) {
			t.Errorf("isSecretName(%q) = true", name)
		}
	}
}
