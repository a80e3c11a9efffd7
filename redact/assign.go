package redact

import "strings"

// A secretWord is what a secret-looking name ends with. The words are
// compared ignoring ASCII case, with _ - . interchangeable, and must follow a
// separator (_ - .) unless the word may make the whole name:
// GITHUB_TOKEN, db.password, --token, X-Auth-Token and token are secret
// names, but KEY, PWD (the working directory), OLDPWD and monkey are not.
type secretWord struct {
	word  string
	whole wholeName
}

// wholeName says when a secret word alone is a secret name.
type wholeName int

const (
	never  wholeName = iota
	quoted           // only as a quoted name: "auth": "..." but not a log's "auth: ..."
	always
)

var secretWords = []secretWord{
	{"token", always},
	{"secret", always},
	{"password", always},
	{"passwd", always},
	{"apikey", always},
	{"authorization", always},
	{"auth", quoted},      // Docker's config.json "auth": base64 of user:password
	{"authtoken", always}, // .npmrc's _authToken
	{"pgpassword", always},
	{"pass", never},
	{"pwd", never},
	{"key", never},      // API_KEY, api_key, private_key, x-api-key
	{"key_data", never}, // kubeconfig client-key-data
}

// secretWordsByLast lists the secret words by their last byte, in both
// cases, so that a name is compared only with the words it could end with.
var secretWordsByLast = func() (by [256][]secretWord) {
	for _, w := range secretWords {
		last := w.word[len(w.word)-1] // a lower-case letter
		for _, c := range []byte{last, last - 'a' + 'A'} {
			by[c] = append(by[c], w)
		}
	}
	return by
}()

// secretLast holds the bytes a secret name can end with.
var secretLast = func() *byteSet {
	var t byteSet
	for c, words := range secretWordsByLast {
		t[c] = words != nil
	}
	return &t
}()

var (
	nameBytes = setOf(alnum + "_.-")
	// opBefore may precede an assignment operator: the end of a secret
	// word, a closing quote or a blank.
	opBefore = union(secretLast, quoteBytes, blankBytes)
)

// isSep reports whether c separates the words of a name.
func isSep(c byte) bool { return c == '_' || c == '-' || c == '.' }

// isSecretName reports whether name, quoted or not, looks like it holds a
// secret.
func isSecretName(name string, isQuoted bool) bool {
	if name == "" {
		return false
	}
	for _, w := range secretWordsByLast[name[len(name)-1]] {
		if endsWithWord(name, w.word, w.whole == always || (w.whole == quoted && isQuoted)) {
			return true
		}
	}
	return false
}

// endsWithWord reports whether name ends with word after a separator, or,
// if alone, is word.
func endsWithWord(name, word string, alone bool) bool {
	n := len(name) - len(word)
	if n < 0 || (n == 0 && !alone) || (n > 0 && !isSep(name[n-1])) {
		return false
	}
	for i := range len(word) {
		a, b := name[n+i], word[i]
		if a != b && toLower(a) != b && !(isSep(a) && isSep(b)) {
			return false
		}
	}
	return true
}

// toLower returns c in lower case if it is an ASCII letter.
func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// assignment matches the value assigned to a secret name at the operator
// s[op] ('=' or ':'): NAME=value, NAME = value, NAME: value, NAME := value,
// "NAME": "value", 'NAME' => 'value', \"NAME\":\"value\", export NAME=value.
// Its memo is the last unquoted run (see unquotedRun).
func assignment(s string, op int, m memo) (int, int, memo) {
	v := operatorEnd(s, op)
	if v < 0 {
		return 0, 0, m
	}
	end := op - blankBytes.spanBack(s[:op])
	quote := byte(0) // closing a quoted name
	if end > 0 && quoteBytes[s[end-1]] {
		quote = s[end-1]
		end--
		if end > 0 && s[end-1] == '\\' {
			end--
		}
	}
	start := end - nameBytes.spanBack(s[:end])
	if start > 0 && s[start-1] == '\\' && start < end && strings.IndexByte("ntr", s[start]) >= 0 {
		start++ // the \n, \t, \r of escaped text end the word before
	}
	name := s[start:end]
	switch {
	case !isSecretName(name, quote != 0),
		quote != 0 && (start == 0 || s[start-1] != quote),      // "../etc/passwd": invalid
		start > 0 && (s[start-1] == '/' || s[start-1] == '\\'), // open /etc/passwd: permission denied
		s[op] == ':' && strings.HasSuffix(s[:start], "//"):     // scheme://token:password@host is urlPassword's
		return 0, 0, m
	}
	v += blankBytes.span(s[v:])
	authz := endsWithWord(name, "authorization", true)
	if q := quoteAt(s, v); q != "" {
		start := v + len(q)
		end := closingQuote(s, start, q)
		if authz {
			start = skipScheme(s[:end], start)
		}
		if isPlaceholder(s[start:end]) {
			return 0, 0, m
		}
		return start, end, m
	}
	if authz {
		v = skipScheme(s, v)
	}
	if v < m.from || v > m.to {
		m = unquotedRun(s, v)
	}
	end = max(v, m.cut)
	val := s[v:end]
	switch {
	case isPlaceholder(val) || isLiteral(val) || isEmptyCall(val):
		return 0, 0, m
	case m.lit.start > 0 && v < end:
		// Code handing a string over: NewClient("sk-..."), []string{"s3cret"};
		// but os.Getenv("API_KEY") names a secret kept elsewhere.
		if lit := s[m.lit.start:m.lit.end]; isPlaceholder(lit) || isEnvName(lit) {
			return 0, 0, m
		}
		return m.lit.start, m.lit.end, m
	}
	return v, end, m
}

// operatorEnd returns the index after the assignment operator at s[op], or
// -1 if s[op] is not one: == != <= >= =~ :: are comparisons, matches and
// scopes.
func operatorEnd(s string, op int) int {
	next := byte(0)
	if op+1 < len(s) {
		next = s[op+1]
	}
	switch {
	case s[op] == '=' && (next == '=' || next == '~'), s[op] == ':' && next == ':':
		return -1
	case s[op] == '=' && next == '>', s[op] == ':' && next == '=':
		return op + 2
	}
	return op + 1
}

// unquotedBytes may make up an unquoted value.
var unquotedBytes = setExcept(space + quotes + ",;&")

// unquotedRun measures the unquoted value starting at s[v]. The run of bytes
// up to whitespace (or the \n, \t, \r of escaped text), a quote, ',', ';'
// or '&' is s[v:to]; the value ends at cut, before a backslash escaping the
// closing quote of a JSON string ({\"token\":abc\"}) and before closing
// brackets the run does not open, which close the code around it
// (f(api_key=key), {token: t}). A value ending with an opening bracket and a
// quote is code handing over the string literal lit. A value starting
// inside the run ends at the same place.
func unquotedRun(s string, v int) memo {
	r := memo{from: v, to: v + unquotedBytes.span(s[v:])}
	for k := v; ; k++ {
		j := strings.IndexByte(s[k:r.to], '\\')
		if j < 0 {
			break
		}
		if k += j; k+1 < len(s) && strings.IndexByte("ntr", s[k+1]) >= 0 {
			r.to = k
			break
		}
	}
	r.cut = r.to
	if r.cut > v && r.cut < len(s) && quoteBytes[s[r.cut]] && s[r.cut-1] == '\\' {
		r.cut--
	}
	var opens [3]bool
	for k := range opens {
		opens[k] = strings.IndexByte(s[v:r.to], "([{"[k]) >= 0
	}
	for r.cut > v {
		k := strings.IndexByte(")]}", s[r.cut-1])
		if k < 0 || opens[k] {
			break
		}
		r.cut--
	}
	if q := quoteAt(s, r.cut); q != "" && r.cut > v && strings.IndexByte("([{", s[r.cut-1]) >= 0 {
		r.lit.start = r.cut + len(q)
		r.lit.end = closingQuote(s, r.lit.start, q)
	}
	return r
}

// quoteAt returns the quote opening a value at s[i], if any.
func quoteAt(s string, i int) string {
	switch {
	case i < len(s) && quoteBytes[s[i]]:
		return s[i : i+1]
	case i+1 < len(s) && s[i] == '\\' && quoteBytes[s[i+1]]:
		return s[i : i+2]
	}
	return ""
}

// closingQuote returns the index of the quote q closing a value that starts
// at s[i], skipping backslash escapes. An unclosed value ends with its line
// (a value never spans lines; see maxPasses).
func closingQuote(s string, i int, q string) int {
	for ; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], q), s[i] == '\n', s[i] == '\r':
			return i
		case s[i] == '\\' && len(q) == 1 && i+1 < len(s) && s[i+1] != '\n':
			i++
		}
	}
	return len(s)
}

var letterBytes = setOf(upper + lower)

// skipScheme returns the index of the credentials in an Authorization value
// starting at s[v]: after a leading word of letters and blanks when more
// follows on the line, else v.
func skipScheme(s string, v int) int {
	w := v + letterBytes.span(s[v:])
	c := w + blankBytes.span(s[w:])
	if w == v || c == w || c == len(s) || !unquotedBytes[s[c]] {
		return v
	}
	return c
}

// isPlaceholder reports whether a value holds no secret: it is empty, the
// mask, a reference to a secret: ${VAR}, ${{ secrets.X }}, $(command), $VAR
// (see isEnvName), or a slot a program fills in: %s, %-8v, {password}.
func isPlaceholder(v string) bool {
	switch {
	case v == "" || v == mask:
		return true
	case len(v) < 2:
		return false
	case v[0] == '$':
		return v[1] == '{' || v[1] == '(' || isEnvName(v[1:])
	case v[0] == '%':
		return letterBytes[v[len(v)-1]] && verbFlagBytes.span(v[1:]) == len(v)-2
	case v[0] == '{':
		return v[len(v)-1] == '}' && identPathBytes.span(v[1:]) == len(v)-2
	}
	return false
}

var (
	envNameBytes   = setOf(upper + digits + "_")
	digitBytes     = setOf(digits)
	verbFlagBytes  = setOf(digits + "-+# .*")
	identPathBytes = setOf(alnum + "_.")
	typeBytes      = setOf(alnum + "_.[]*")
)

// isEnvName reports whether v is spelled as environment variables are: in
// capitals, digits and underscores, not starting with a digit.
func isEnvName(v string) bool {
	return v != "" && !digitBytes[v[0]] && envNameBytes.span(v) == len(v)
}

// isLiteral reports whether an unquoted value is a constant of JSON, YAML,
// Go or Python, or brackets opening a structure ("secret": {), not a secret.
func isLiteral(v string) bool {
	switch v {
	case "null", "true", "false", "nil", "None":
		return true
	}
	return strings.Trim(v, "{}[]") == ""
}

// isEmptyCall reports whether an unquoted value is code calling a function
// or building a value from nothing: getToken(), []string{}, dict().
func isEmptyCall(v string) bool {
	n := typeBytes.span(v)
	if n == 0 || n+1 >= len(v) || digitBytes[v[0]] || strings.IndexByte("([{", v[n]) < 0 {
		return false
	}
	return strings.Trim(v[n+1:], ")]}") == ""
}
