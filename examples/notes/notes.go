package main

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/toolhost/toolhost/sdk"
)

// settings is the plugin block's config {}.
type settings struct {
	MaxNotes int `json:"max_notes"`
}

// AddArgs are the arguments of add_note.
type AddArgs struct {
	Title string `json:"title" jsonschema:"a short title, unique in the notebook"`
	Body  string `json:"body" jsonschema:"the note's text"`
}

// GetArgs are the arguments of get_note.
type GetArgs struct {
	Title string `json:"title" jsonschema:"the title of the note to read"`
}

// SearchArgs are the arguments of search_notes.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"text to look for in titles and bodies, case-insensitive"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many titles (default 20)"`
}

type notebook struct {
	mu    sync.Mutex
	max   int
	notes map[string]string
}

func newGroup() *sdk.Group {
	nb := &notebook{max: 100, notes: map[string]string{}}
	return &sdk.Group{
		ID:          "notes",
		Description: "A notebook: add, read and search short notes.",
		Version:     "0.1.0",
		OnConfigure: nb.configure,
		Tools: []sdk.Tool{
			sdk.NewTool("add_note", "Add a note, or replace the note with the same title.", nb.add, sdk.Title("Add note")),
			sdk.NewTool("get_note", "Read a note by its title.", nb.get, sdk.Title("Read note")),
			sdk.NewTool("search_notes", "List the titles of notes containing some text.", nb.search, sdk.Title("Search notes")),
		},
	}
}

func (nb *notebook) configure(_ context.Context, req *sdk.ConfigureRequest) error {
	s := settings{MaxNotes: nb.max}
	if err := sdk.DecodeConfig(req, &s); err != nil {
		return err
	}
	if s.MaxNotes < 1 {
		return sdk.Errorf(sdk.CodeValidation, "notes: config: max_notes must be at least 1, not %d", s.MaxNotes)
	}
	nb.max = s.MaxNotes
	return nil
}

func (nb *notebook) add(_ context.Context, req *sdk.Request[AddArgs]) (*sdk.Result, error) {
	title := strings.TrimSpace(req.Args.Title)
	if title == "" {
		return nil, sdk.Errorf(sdk.CodeValidation, "title: must not be blank")
	}
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if _, ok := nb.notes[title]; !ok && len(nb.notes) >= nb.max {
		return nil, sdk.Errorf(sdk.CodePolicy, "the notebook is full (%d notes)", nb.max)
	}
	nb.notes[title] = req.Args.Body
	res := sdk.Text("saved " + title)
	res.Meta = map[string]any{"notes": len(nb.notes)}
	return res, nil
}

func (nb *notebook) get(_ context.Context, req *sdk.Request[GetArgs]) (*sdk.Result, error) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	body, ok := nb.notes[req.Args.Title]
	if !ok {
		return nil, sdk.Errorf(sdk.CodeToolExec, "no note titled %q", req.Args.Title)
	}
	return sdk.Text(body), nil
}

func (nb *notebook) search(_ context.Context, req *sdk.Request[SearchArgs]) (*sdk.Result, error) {
	limit := req.Args.Limit
	if limit <= 0 {
		limit = 20
	}
	q := strings.ToLower(req.Args.Query)
	nb.mu.Lock()
	var titles []string
	for title, body := range nb.notes {
		if strings.Contains(strings.ToLower(title), q) || strings.Contains(strings.ToLower(body), q) {
			titles = append(titles, title)
		}
	}
	nb.mu.Unlock()
	slices.Sort(titles)
	res := sdk.Text(strings.Join(titles[:min(limit, len(titles))], "\n"))
	res.TruncatedLines = len(titles) > limit
	return res, nil
}
