// Package toolsearch ranks tool definitions against a task described in
// words, for the runtime's find_tools: an agent whose role defers tool
// groups asks for "take a picture of the page" and is shown screenshot.
//
// The ranking is BM25F (Okapi BM25 over weighted fields): a tool's name
// (split at '_', '-', '.' and camelCase) weighs most, then its input
// schema's property names, its title, description and group id, and its
// properties' descriptions. Its group's description and its annotations
// are read but weigh nothing: each lowered recall. Text is lower-cased, cut at every
// non-alphanumeric character, stripped of a short list of English stop
// words and lightly stemmed (plurals, -ly, -ing, -ed, a final e). A query
// word also stands for its synonyms from a small table of the vocabulary
// tasks use (folder for directory, picture for screenshot) at a lower
// weight, and a file name, path or URL in a query for "file", "path" or
// "url": BM25 alone matches only the words a tool's author happened to use.
// Each hit says why it matched, in one line: which query words, or their
// synonyms, it holds in which fields ("picture → screenshot (synonym):
// name"), so that a model can choose among several candidates.
//
// Retrieval quality is measured on a real catalog, testdata/catalog.json
// (the first-party modules, the runtime's groups and the npm MCP servers
// filesystem, memory and everything; `go generate` rebuilds it), against
// the task phrasings of testdata/queries.json and the frozen blind set
// testdata/queries_blind.json; testdata/README.md has the
// figures and how the defaults were chosen.
package toolsearch

//go:generate go test -run ^TestCatalog$ -update .
