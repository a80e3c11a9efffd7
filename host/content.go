package host

import (
	"fmt"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/redact"
)

const (
	// maxContentBinary bounds the binary data of a result's content blocks
	// together (images, audio, embedded blobs), as the gRPC message size
	// bounds a plugin's attachments.
	maxContentBinary = 4 << 20
	// maxContentBlocks bounds the blocks a result keeps, whatever their
	// size.
	maxContentBlocks = 1000
)

// contentCut says what the output limits took from a result's content.
type contentCut struct {
	lines, bytes bool
}

// finishContent redacts a result's content blocks (text, an embedded
// resource's text, and the strings, annotations and _meta of every block) and holds them
// to the output limits, in order, on a copy: the text of the text blocks
// and embedded text resources, with every other field but binary data,
// shares the byte and line limits (a newline counted between two texts, as
// stdout joins them); the block that crosses a limit has its
// text cut, and the text blocks after it are dropped. Binary data shares
// maxContentBinary, and the blocks kept maxContentBlocks. A block other
// than text whose fields or data do not fit is dropped, as is every block
// past maxContentBlocks, one text block in place of the first saying how
// many were (stdout holds it too, past the limit). It returns the blocks,
// their text joined by newlines (the result's stdout:
// [toolhost.Content.StdoutText]), and whether anything was redacted or cut.
func finishContent(in []toolhost.Content, maxLines, maxBytes int) (out []toolhost.Content, stdout string, redacted bool, cut contentCut) {
	out = make([]toolhost.Content, 0, len(in))
	var texts []string
	usedLines, usedBytes, usedBinary := 0, 0, 0
	note, noteText, drops := -1, 0, 0 // where the note of the blocks dropped is (in out, in texts), and how many
	drop := func() {
		if note < 0 {
			note, noteText = len(out), len(texts)
			out = append(out, toolhost.Content{Type: toolhost.ContentText})
			texts = append(texts, "")
		}
		drops++
	}
	for _, b := range in {
		if len(out) >= maxContentBlocks {
			cut.bytes = true
			drop()
			continue
		}
		b, changed := redactBlock(b)
		redacted = redacted || changed
		_, textual := b.StdoutText()
		sep := 0
		if textual && len(texts) > 0 {
			sep = 1 // the newline that joins it to the text before in stdout
		}
		fields := len(b.URI) + len(b.Name) + len(b.Title) + len(b.Description) + len(b.MimeType) + len(b.Icons) + len(b.Annotations) + len(b.Meta)
		binary := len(b.Data)
		text := &b.Text
		if r := b.Resource; r != nil {
			fields += len(r.URI) + len(r.MimeType) + len(r.Meta)
			binary += len(r.Blob)
			text = &r.Text // b.Resource is the copy redactBlock made
		}
		linesLeft, bytesLeft := maxLines-usedLines-sep, maxBytes-usedBytes-sep-fields
		if maxBytes > 0 && bytesLeft < 0 || usedBinary+binary > maxContentBinary {
			cut.bytes = true
			if b.Type != toolhost.ContentText {
				drop()
			}
			continue
		}
		if *text != "" {
			if maxBytes > 0 && bytesLeft == 0 || maxLines > 0 && linesLeft <= 0 {
				// No room for its text: a text block goes, another keeps
				// the rest.
				cut.lines, cut.bytes = cut.lines || maxLines > 0 && linesLeft <= 0, cut.bytes || maxBytes > 0 && bytesLeft == 0
				if b.Type == toolhost.ContentText {
					continue
				}
				*text = ""
			} else {
				kept := output.Limit(*text, max(linesLeft, 0), max(bytesLeft, 0), false)
				*text = kept.Text
				cut.lines, cut.bytes = cut.lines || kept.Lines, cut.bytes || kept.Bytes
			}
		}
		if t, ok := b.StdoutText(); ok {
			texts = append(texts, t)
		} else {
			sep = 0 // a resource whose text went
		}
		usedLines += sep + strings.Count(*text, "\n")
		usedBytes += sep + fields + len(*text)
		usedBinary += binary
		out = append(out, b)
	}
	if note >= 0 {
		out[note].Text = fmt.Sprintf("[%d content block(s) dropped here and after: past the output limits]", drops)
		texts[noteText] = out[note].Text
	}
	return out, strings.Join(texts, "\n"), redacted, cut
}

// redactBlock redacts a block's text, an embedded resource's text, and the
// strings, icons, annotations and _meta of either, on a copy.
func redactBlock(b toolhost.Content) (toolhost.Content, bool) {
	var redacted bool
	str := func(s *string) {
		var changed bool
		*s, changed = redact.String(*s)
		redacted = redacted || changed
	}
	raw := func(j *[]byte) {
		if len(*j) > 0 {
			var changed bool
			*j, changed = redact.JSON(*j)
			redacted = redacted || changed
		}
	}
	for _, s := range []*string{&b.Text, &b.URI, &b.Name, &b.Title, &b.Description} {
		if *s != "" {
			str(s)
		}
	}
	raw((*[]byte)(&b.Meta))
	raw((*[]byte)(&b.Icons))
	raw((*[]byte)(&b.Annotations))
	if b.Resource != nil {
		r := *b.Resource
		str(&r.Text)
		str(&r.URI)
		raw((*[]byte)(&r.Meta))
		b.Resource = &r
	}
	return b, redacted
}
