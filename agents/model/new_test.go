package model

import (
	"strings"
	"testing"

	"github.com/toolhost/toolhost/config"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		model   config.Model
		env     map[string]string
		check   func(t *testing.T, p Provider)
		wantErr string // a prefix
	}{
		{
			name:  "openai from the environment",
			model: config.Model{Name: "gpt", Type: config.ModelOpenAI, Protocol: "native", MaxRetries: 2},
			env:   map[string]string{"OPENAI_BASE_URL": "http://env/v1", "OPENAI_MODEL": "env-model", "OPENAI_API_KEY": "env-key"},
			check: func(t *testing.T, p Provider) {
				c, ok := p.(*OpenAI)
				if !ok {
					t.Fatalf("provider is %T, want *OpenAI", p)
				}
				want := OpenAIOptions{BaseURL: "http://env/v1", Model: "env-model", APIKey: "env-key", MaxRetries: 2}
				if c.opts != want || c.endpoint != "http://env/v1/chat/completions" {
					t.Errorf("options = %+v, endpoint %q", c.opts, c.endpoint)
				}
			},
		},
		{
			name:  "openai block over the environment",
			model: config.Model{Name: "gpt", Type: config.ModelOpenAI, BaseURL: "http://block", Model: "m", APIKey: "k"},
			env:   map[string]string{"OPENAI_BASE_URL": "http://env/v1", "OPENAI_MODEL": "env-model", "OPENAI_API_KEY": "env-key"},
			check: func(t *testing.T, p Provider) {
				c := p.(*OpenAI)
				if c.opts.BaseURL != "http://block" || c.opts.Model != "m" || c.opts.APIKey != "k" {
					t.Errorf("options = %+v", c.opts)
				}
			},
		},
		{
			name:    "openai without a base URL",
			model:   config.Model{Name: "gpt", Type: config.ModelOpenAI, APIKey: "sk-hidden", Pos: "c.hcl:3,1"},
			env:     map[string]string{"OPENAI_BASE_URL": ""},
			wantErr: `model "gpt" (c.hcl:3,1): base_url is not set, nor OPENAI_BASE_URL`,
		},
		{
			name:  "json protocol",
			model: config.Model{Name: "small", Type: config.ModelOpenAI, BaseURL: "http://x", Protocol: "json"},
			check: func(t *testing.T, p Provider) {
				j, ok := p.(*jsonProtocol)
				if !ok {
					t.Fatalf("provider is %T, want the JSON protocol", p)
				}
				if _, ok := j.inner.(*OpenAI); !ok {
					t.Errorf("inner provider is %T, want *OpenAI", j.inner)
				}
			},
		},
		{
			name:  "scripted",
			model: config.Model{Name: "demo", Type: config.ModelScripted, Script: "testdata/demo.json"},
			check: func(t *testing.T, p Provider) {
				if _, ok := p.(*Scripted); !ok {
					t.Errorf("provider is %T, want *Scripted", p)
				}
			},
		},
		{
			name:    "scripted with a missing file",
			model:   config.Model{Name: "demo", Type: config.ModelScripted, Script: "testdata/missing.json", Pos: "c.hcl:9,1"},
			wantErr: `model "demo" (c.hcl:9,1): model: scripted: open testdata/missing.json: `,
		},
		{
			name:    "unknown type",
			model:   config.Model{Name: "x", Type: "llama", Pos: "c.hcl:1,1"},
			wantErr: `model "x" (c.hcl:1,1): unknown type "llama" (want "openai" or "scripted")`,
		},
		{
			name:    "unknown protocol",
			model:   config.Model{Name: "x", Type: config.ModelScripted, Script: "testdata/demo.json", Protocol: "xml", Pos: "c.hcl:1,1"},
			wantErr: `model "x" (c.hcl:1,1): unknown protocol "xml" (want "native" or "json")`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range []string{"OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"} {
				t.Setenv(name, tt.env[name])
			}
			p, err := New(tt.model)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want prefix %q", err, tt.wantErr)
				}
				if tt.model.APIKey != "" && strings.Contains(err.Error(), tt.model.APIKey) {
					t.Errorf("err = %q holds the API key", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}
