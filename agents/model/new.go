package model

import (
	"fmt"
	"os"

	"github.com/toolhost/toolhost/config"
)

// New returns the provider a model block configures. An openai block's
// empty base_url, model and api_key come from the environment variables
// OPENAI_BASE_URL, OPENAI_MODEL and OPENAI_API_KEY. With protocol "json"
// the provider is wrapped in [JSONProtocol].
func New(m config.Model) (Provider, error) {
	var p Provider
	switch m.Type {
	case config.ModelOpenAI:
		o := OpenAIOptions{
			BaseURL:    orEnv(m.BaseURL, "OPENAI_BASE_URL"),
			Model:      orEnv(m.Model, "OPENAI_MODEL"),
			APIKey:     orEnv(m.APIKey, "OPENAI_API_KEY"),
			Timeout:    m.Timeout,
			MaxRetries: m.MaxRetries,
		}
		if o.BaseURL == "" {
			return nil, fmt.Errorf("model %q (%s): base_url is not set, nor OPENAI_BASE_URL", m.Name, m.Pos)
		}
		c, err := NewOpenAI(o)
		if err != nil {
			return nil, fmt.Errorf("model %q (%s): %w", m.Name, m.Pos, err)
		}
		p = c
	case config.ModelScripted:
		s, err := NewScripted(m.Script)
		if err != nil {
			return nil, fmt.Errorf("model %q (%s): %w", m.Name, m.Pos, err)
		}
		p = s
	default:
		return nil, fmt.Errorf("model %q (%s): unknown type %q (want %q or %q)", m.Name, m.Pos, m.Type, config.ModelOpenAI, config.ModelScripted)
	}
	switch m.Protocol {
	case "", "native":
		return p, nil
	case "json":
		return JSONProtocol(p), nil
	}
	return nil, fmt.Errorf("model %q (%s): unknown protocol %q (want \"native\" or \"json\")", m.Name, m.Pos, m.Protocol)
}

// orEnv is v, or the environment variable when v is empty.
func orEnv(v, name string) string {
	if v == "" {
		return os.Getenv(name)
	}
	return v
}
