package toolsearch

import (
	"path"
	"slices"
	"strings"
)

// queryWord is one term of a query: literal words (the parts of a file
// name, a path or a URL) are searched as they are, without synonyms.
type queryWord struct {
	term    string
	literal bool
	word    string // the word of the query it comes from, lower-cased, for Why
}

// fileExtensions are the extensions that make a query word a file name
// ("main.go", "logo.png"), each with the term the file stands for besides
// "file": that of its media for images, sounds and videos, else none.
var fileExtensions = map[string]string{}

func init() {
	for _, ext := range strings.Fields(`txt md markdown rst log csv tsv json jsonl yaml yml toml ini cfg conf
		xml html htm css js mjs cjs ts tsx jsx go mod py rb rs java kt c h cc cpp hpp cs php sh bash zsh
		sql proto lock pdf zip gz tgz tar bz2 xz doc docx xls xlsx ppt pptx`) {
		fileExtensions[ext] = ""
	}
	for media, exts := range map[string]string{
		"image": "png jpg jpeg gif svg webp bmp ico",
		"audio": "mp3 wav ogg flac m4a",
		"video": "mp4 mov webm avi mkv",
	} {
		for _, ext := range strings.Fields(exts) {
			fileExtensions[ext] = stem(media)
		}
	}
}

// queryWords splits a query into the terms to search. A word that is a URL
// ("https://…", "www.…") stands for the term "url", a file name with a
// known extension for "file" (and "image", "audio" or "video" for media),
// a path without one ("build/output") for "path"; their parts are kept
// as literal terms, so that the "go" of "main.go" is not read as English.
// Every other word is tokenized as a document is. With hints false, every
// word is tokenized alike. Each term comes once, sorted; a term both
// literal and not is not literal.
func queryWords(query string, hints bool) []queryWord {
	var words []queryWord
	var lower string
	add := func(literal bool, terms ...string) {
		for _, t := range terms {
			words = append(words, queryWord{t, literal, lower})
		}
	}
	// plain adds the terms of an ordinary word, each with the part of it
	// it comes from ("readTextFile" → read, text, file).
	plain := func(f string) {
		for _, w := range splitWords(f) {
			if t, ok := term(w); ok {
				words = append(words, queryWord{t, false, strings.ToLower(w)})
			}
		}
	}
	for _, f := range strings.Fields(query) {
		f = strings.Trim(f, ".,;:!?'\"()[]{}<>`")
		lower = strings.ToLower(f)
		ext := strings.TrimPrefix(path.Ext(lower), ".")
		media, isFile := fileExtensions[ext]
		switch {
		case !hints:
			plain(f)
		case strings.Contains(lower, "://") || strings.HasPrefix(lower, "www."):
			add(false, stem("url"))
			add(true, tokenize(f)...)
		case isFile && len(path.Base(lower)) > len(ext)+1:
			add(false, stem("file"))
			if media != "" {
				add(false, media)
			}
			add(true, tokenize(f)...)
		case strings.Contains(strings.Trim(f, "/."), "/"):
			add(false, stem("path"))
			add(true, tokenize(f)...)
		default:
			plain(f)
		}
	}
	slices.SortStableFunc(words, func(a, b queryWord) int {
		if c := strings.Compare(a.term, b.term); c != 0 {
			return c
		}
		switch {
		case a.literal == b.literal:
			return 0
		case !a.literal:
			return -1
		}
		return 1
	})
	return slices.CompactFunc(words, func(a, b queryWord) bool { return a.term == b.term })
}
