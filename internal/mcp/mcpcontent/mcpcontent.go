// Package mcpcontent maps MCP content blocks onto [toolhost.Content] and
// back, each block with its annotations and _meta: an mcp_server module's
// results (a tool's blocks in order, a prompt's messages) reach the host as
// the server sent them (mcpsource), and a role's MCP client gets them as
// they came (mcpfront).
package mcpcontent

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
)

// From returns the blocks of an MCP result as the host holds them, in
// their order. A block of a type a tool result does not carry (sampling's
// tool use) is left out.
func From(in []mcp.Content) []toolhost.Content {
	out := make([]toolhost.Content, 0, len(in))
	for _, c := range in {
		if b, ok := Block(c); ok {
			out = append(out, b)
		}
	}
	return out
}

// Block returns one MCP content block as the host holds it; false for a
// type a tool result or a prompt does not carry.
func Block(c mcp.Content) (toolhost.Content, bool) {
	var b toolhost.Content
	switch c := c.(type) {
	case *mcp.TextContent:
		b = toolhost.Content{Type: toolhost.ContentText, Text: c.Text, Annotations: raw(c.Annotations), Meta: rawMeta(c.Meta)}
	case *mcp.ImageContent:
		b = toolhost.Content{Type: toolhost.ContentImage, MimeType: c.MIMEType, Data: c.Data, Annotations: raw(c.Annotations), Meta: rawMeta(c.Meta)}
	case *mcp.AudioContent:
		b = toolhost.Content{Type: toolhost.ContentAudio, MimeType: c.MIMEType, Data: c.Data, Annotations: raw(c.Annotations), Meta: rawMeta(c.Meta)}
	case *mcp.ResourceLink:
		b = toolhost.Content{Type: toolhost.ContentResourceLink, URI: c.URI, Name: c.Name, Title: c.Title, Description: c.Description,
			MimeType: c.MIMEType, Size: c.Size, Annotations: raw(c.Annotations), Meta: rawMeta(c.Meta)}
		if len(c.Icons) > 0 {
			b.Icons, _ = json.Marshal(c.Icons)
		}
	case *mcp.EmbeddedResource:
		b = toolhost.Content{Type: toolhost.ContentResource, Annotations: raw(c.Annotations), Meta: rawMeta(c.Meta)}
		if r := c.Resource; r != nil {
			b.Resource = &toolhost.ResourceContents{URI: r.URI, MimeType: r.MIMEType, Text: r.Text, Blob: r.Blob, Meta: rawMeta(r.Meta)}
		}
	default:
		return b, false
	}
	return b, true
}

// To returns the blocks as MCP content, in their order.
func To(in []toolhost.Content) []mcp.Content {
	out := make([]mcp.Content, 0, len(in))
	for _, b := range in {
		if c := MCP(b); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// MCP returns one block as MCP content; nil for a type MCP has not.
// Annotations, _meta and icons that do not decode into the SDK's types are
// left out.
func MCP(b toolhost.Content) mcp.Content {
	var ann *mcp.Annotations
	if len(b.Annotations) > 0 {
		var a mcp.Annotations
		if json.Unmarshal(b.Annotations, &a) == nil {
			ann = &a
		}
	}
	meta := mcpMeta(b.Meta)
	switch b.Type {
	case toolhost.ContentText:
		return &mcp.TextContent{Text: b.Text, Annotations: ann, Meta: meta}
	case toolhost.ContentImage:
		return &mcp.ImageContent{Data: b.Data, MIMEType: b.MimeType, Annotations: ann, Meta: meta}
	case toolhost.ContentAudio:
		return &mcp.AudioContent{Data: b.Data, MIMEType: b.MimeType, Annotations: ann, Meta: meta}
	case toolhost.ContentResourceLink:
		l := &mcp.ResourceLink{URI: b.URI, Name: b.Name, Title: b.Title, Description: b.Description, MIMEType: b.MimeType,
			Size: b.Size, Annotations: ann, Meta: meta}
		if len(b.Icons) > 0 && json.Unmarshal(b.Icons, &l.Icons) != nil {
			l.Icons = nil
		}
		return l
	case toolhost.ContentResource:
		e := &mcp.EmbeddedResource{Annotations: ann, Meta: meta}
		if r := b.Resource; r != nil {
			e.Resource = &mcp.ResourceContents{URI: r.URI, MIMEType: r.MimeType, Text: r.Text, Blob: r.Blob, Meta: mcpMeta(r.Meta)}
		}
		return e
	}
	return nil
}

// raw encodes v, a value the SDK decoded; nil when v is nil.
func raw[T any](v *T) json.RawMessage {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// rawMeta encodes a _meta; nil when it is empty.
func rawMeta(m mcp.Meta) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}

// mcpMeta decodes a _meta; nil when it is empty or does not decode.
func mcpMeta(b json.RawMessage) mcp.Meta {
	if len(b) == 0 {
		return nil
	}
	var m mcp.Meta
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
