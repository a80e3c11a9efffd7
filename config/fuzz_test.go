package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

func FuzzParse(f *testing.F) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.hcl"))
	if err != nil {
		f.Fatal(err)
	}
	for _, in := range inputs {
		src, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	opts := &Options{Getenv: getenv(testEnv)}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := Parse(src, "fuzz.hcl", opts)
		if err != nil {
			var diags Diagnostics
			if !errors.As(err, &diags) || err.Error() == "" {
				t.Fatalf("error %T %q is not a non-empty Diagnostics", err, err)
			}
			if cfg != nil {
				t.Fatal("Config returned with an error")
			}
			return
		}
		for _, p := range cfg.Plugins {
			var obj map[string]any
			if err := json.Unmarshal(p.Config, &obj); err != nil || obj == nil {
				t.Fatalf("plugin %q config %s is not a JSON object: %v", p.Name, p.Config, err)
			}
			if p.Sandbox != nil && !p.Sandbox.Off {
				if err := p.Sandbox.Validate(); err != nil {
					t.Fatalf("plugin %q: a sandbox block that parsed is invalid: %v", p.Name, err)
				}
			}
		}
	})
}

// FuzzQuote: the HCL string Quote writes has s itself as its value, a
// template sequence in s included, as HCL holds every string: in Unicode's
// normal form C (cty.StringVal's; U+0340 reads as U+0300).
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "/srv/ws", "${x}", "%{if}", "$${", "a\"b\\c\n\t", "\u202e", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // HCL source is UTF-8
		}
		expr, diags := hclsyntax.ParseExpression([]byte(Quote(s)), "q", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("Quote(%q) = %s does not parse: %v", s, Quote(s), diags)
		}
		v, diags := expr.Value(nil)
		if diags.HasErrors() || v.AsString() != cty.StringVal(s).AsString() {
			t.Fatalf("Quote(%q) = %s has the value %#v (%v)", s, Quote(s), v, diags)
		}
	})
}
