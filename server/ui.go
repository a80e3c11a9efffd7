package server

import (
	"embed"
	"net/http"
	"path"
	"strings"

	"github.com/toolhost/toolhost"
)

// The web UI: a single page (ui/index.html) with its script and style sheet,
// embedded in the binary. It uses only the JSON API, from the same origin.
//
//go:embed ui
var uiFiles embed.FS

// uiTypes are the content types of the UI's files, by extension.
var uiTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
	".svg":  "image/svg+xml",
}

// uiPolicy lets the page load nothing but its own files and talk to nothing
// but its own server.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

func (s *Server) routesUI() {
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { serveUIFile(w, "index.html") })
	s.mux.HandleFunc("GET /ui/{file}", func(w http.ResponseWriter, r *http.Request) { serveUIFile(w, r.PathValue("file")) })
}

// isUIAsset reports whether r asks for one of the UI's static files, which
// hold no data: the page must load before it can ask for the bearer token.
func isUIAsset(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/ui/")
}

func serveUIFile(w http.ResponseWriter, name string) {
	typ, ok := uiTypes[path.Ext(name)]
	var b []byte
	var err error
	if ok && !strings.ContainsAny(name, `/\`) {
		b, err = uiFiles.ReadFile("ui/" + name)
	}
	if !ok || err != nil {
		writeError(w, http.StatusNotFound, toolhost.Errorf(toolhost.CodeValidation, "no such file: /ui/%s", name))
		return
	}
	h := w.Header()
	h.Set("Content-Type", typ)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", uiPolicy)
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
