package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Value returns a copy of v (a value decoded from JSON: map[string]any, []any, string, float64, bool, nil, [json.Number])
// with every string redacted by [String], and whether anything was replaced. Additionally, a string value whose
// map KEY looks secret (case-insensitive: ends with _token, _secret, _password, _key, _apikey, or equals
// token, secret, password, passwd, api_key, apikey, authorization, access_token, refresh_token, private_key, client_secret)
// is replaced by ***REDACTED*** whole. Other values are returned as they are (no copying needed for non-containers).
//
// The names are those String treats as secret in assignments, so "-" and "."
// separate words as "_" does (x-api-key, db.password), and auth, _pass,
// _pwd and a few more count too. Empty strings are kept. Map keys are redacted by String
// like any string; should two keys become equal, the entry of the key that
// sorts first is kept.
func Value(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		return String(v)
	case []any:
		out := make([]any, len(v))
		changed := false
		for i, e := range v {
			var c bool
			out[i], c = Value(e)
			changed = changed || c
		}
		return out, changed
	case map[string]any:
		return redactMap(v)
	}
	return v, false
}

// redactMap is Value for a map.
func redactMap(m map[string]any) (map[string]any, bool) {
	out := make(map[string]any, len(m))
	changed := false
	var origin map[string]string // the original key of each entry whose key was redacted
	for k, e := range m {
		rk, kc := String(k)
		if _, dup := out[rk]; dup {
			first, ok := origin[rk]
			if !ok {
				first = rk
			}
			if first < k {
				changed = true
				continue
			}
		}
		if kc {
			if origin == nil {
				origin = map[string]string{}
			}
			origin[rk] = k
		} else {
			delete(origin, rk)
		}
		var c bool
		if s, ok := e.(string); ok && s != "" && s != mask && isSecretName(k, true) {
			out[rk], c = mask, true
		} else {
			out[rk], c = Value(e)
		}
		changed = changed || c || kc
	}
	return out, changed
}

// JSON redacts a JSON document (as [Value] does) and re-encodes it; invalid JSON is redacted as a plain string.
//
// When nothing is redacted raw itself is returned, keeping its layout; else
// the result is compact, with object keys sorted and numbers as written.
func JSON(raw []byte) ([]byte, bool) {
	if bytes.IndexByte(raw, '"') < 0 && json.Valid(raw) {
		// A document without strings has no keys and no text to redact:
		// the arguments of most calls ("{}"), kept without decoding.
		return raw, false
	}
	if v, err := decode(raw); err == nil {
		r, changed := Value(v)
		if !changed {
			return raw, false
		}
		if out, err := encode(r); err == nil {
			return out, true
		}
	}
	s, changed := String(string(raw))
	if !changed {
		return raw, false
	}
	return []byte(s), true
}

// decode decodes raw, which must hold exactly one JSON value, keeping
// numbers as json.Number.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("redact: data after the JSON value")
	}
	return v, nil
}

// encode encodes v compactly without escaping <, > and &.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
