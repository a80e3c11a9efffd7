package server

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolhost/toolhost"
)

// maxBody caps every request body; endpoints cap theirs lower still.
const maxBody = 32 << 20

// guard applies the server's security to every request before routing: a
// bearer token when one is configured (all but GET /healthz and the page's
// own files, which hold no data and must load to ask for the token), no
// state-changing request from another origin, and a cap on the body.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) bool {
	if s.token != "" && r.URL.Path != "/healthz" && !isUIAsset(r) && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolhost"`)
		writeError(w, http.StatusUnauthorized, toolhost.Errorf(toolhost.CodePolicy, "a bearer token is required: send Authorization: Bearer TOKEN"))
		return false
	}
	if changesState(r.Method) && crossOrigin(r) {
		writeError(w, http.StatusForbidden, toolhost.Errorf(toolhost.CodePolicy, "cross-origin %s refused", r.Method))
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	return true
}

// authorized reports whether r carries the token (compared in constant time).
func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

func changesState(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// crossOrigin reports whether a browser says the request comes from another
// site: an Origin whose host is not the request's, or Sec-Fetch-Site
// cross-site. Requests without either (curl, SDKs) are not browsers'.
func crossOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host != r.Host
}
