package toolsearch

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// stopWords are the English words too common to tell tools apart. The list
// is short on purpose: words such as "all", "new", "list" or "first" carry
// meaning for a tool and are kept.
var stopWords = map[string]bool{
	"a": true, "about": true, "also": true, "am": true, "an": true, "and": true, "another": true,
	"are": true, "as": true, "at": true, "be": true, "been": true, "but": true, "by": true,
	"can": true, "could": true, "do": true, "does": true, "for": true, "from": true, "had": true,
	"has": true, "have": true, "how": true, "i": true, "if": true, "in": true, "into": true,
	"is": true, "it": true, "its": true, "just": true, "let": true, "me": true, "my": true,
	"no": true, "not": true, "of": true, "on": true, "or": true, "other": true, "our": true,
	"please": true, "should": true, "so": true, "that": true, "the": true, "their": true,
	"them": true, "then": true, "there": true, "these": true, "this": true, "those": true,
	"to": true, "us": true, "was": true, "we": true, "were": true, "what": true, "when": true,
	"where": true, "which": true, "who": true, "will": true, "with": true, "would": true,
	"you": true, "your": true,
}

// tokenize splits s into index terms: words are cut at every character
// that is not a letter or digit and at camelCase boundaries ("readTextFile",
// "HTTPRequest" → read text file, http request), lower-cased, stripped of
// stop words and single letters (the s of "what's") and stemmed. The same function serves documents and queries,
// so both sides meet on the same stems.
func tokenize(s string) []string {
	var terms []string
	for _, w := range splitWords(s) {
		if t, ok := term(w); ok {
			terms = append(terms, t)
		}
	}
	return terms
}

// term is the index term of one word of splitWords: lower-cased and
// stemmed; false for a stop word or a single letter.
func term(w string) (string, bool) {
	w = strings.ToLower(w)
	if stopWords[w] || len(w) == 1 && !unicode.IsDigit(rune(w[0])) {
		return "", false
	}
	return stem(w), true
}

// splitWords cuts s into runs of letters and digits, and each run at its
// camelCase boundaries: before an upper-case letter that follows a
// lower-case letter or digit, and before the last upper-case letter of an
// acronym that a lower-case letter follows ("HTTPServer" → HTTP, Server).
func splitWords(s string) []string {
	var words []string
	start := -1 // byte offset of the current word, -1 between words
	var prev rune
	for i, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start, prev = i, r
			continue
		}
		if unicode.IsUpper(r) {
			next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && unicode.IsLower(next) {
				words = append(words, s[start:i])
				start = i
			}
		}
		prev = r
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

// stem strips the commonest English inflections from a lower-case word, a
// light suffix stripper (not Porter's algorithm): plurals (-s, -es, -ies),
// -ly ("currently" → current), -ing and -ed (undoubling a final consonant: "running" → run), then a
// final silent e, so that "write", "writes" and "writing" meet at "writ"
// and "type", "types" and "typed" at "typ". -ing and -ed go only when what
// stays has a vowel and at least three letters, which keeps "string" and
// "need" whole; a final e only from four letters on ("use" stays).
func stem(w string) string {
	if len(w) < 3 || !isASCIILetters(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "zes"),
		strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") &&
		!strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	if strings.HasSuffix(w, "ly") && len(w) >= 6 {
		w = w[:len(w)-2]
	}
	switch {
	case strings.HasSuffix(w, "ied") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ing") && stemmable(w[:len(w)-3]):
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && stemmable(w[:len(w)-2]):
		w = undouble(w[:len(w)-2])
	}
	if strings.HasSuffix(w, "e") && len(w) >= 4 {
		w = w[:len(w)-1]
	}
	return w
}

// stemmable reports whether a word may be cut to stem: three letters or
// more, one of them a vowel.
func stemmable(stem string) bool {
	return len(stem) >= 3 && strings.ContainsAny(stem, "aeiouy")
}

// undouble removes the second of a doubled final consonant ("runn" → run),
// except for l, s and z, which English doubles in the word itself
// ("call", "pass", "buzz"), and in three-letter stems ("added" → add).
func undouble(w string) string {
	n := len(w)
	if n >= 4 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouylsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

// isASCIILetters reports whether w holds only the letters a to z: the
// stemmer knows English suffixes only, and leaves numbers and other
// scripts alone.
func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}
