package config

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// testEnv is the environment the golden tests see.
var testEnv = map[string]string{
	"PORT":      "9999",
	"NOTES_BIN": "/usr/bin/notes",
	"NOTES_DIR": "/srv/notes",
	"TOKEN":     "s3cret",
	"MODEL_KEY": "sk-test",
	"USER":      "Ada",
}

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// TestGolden parses each testdata/*.hcl and compares the outcome with testdata/*.golden:
// the Config as JSON, paths under testdata shown as $DIR, or the error text.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.hcl"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".hcl"), func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, dir, src, in)
			goldenPath := strings.TrimSuffix(in, ".hcl") + ".golden"
			if *update {
				if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", in, goldenPath, got, want)
			}
		})
	}
}

// render parses src and returns the golden text for the outcome.
func render(t *testing.T, dir string, src []byte, filename string) string {
	t.Helper()
	cfg, err := Parse(src, filename, &Options{Getenv: getenv(testEnv)})
	if err != nil {
		var diags Diagnostics
		if !errors.As(err, &diags) {
			t.Fatalf("error %T is not Diagnostics: %v", err, err)
		}
		return err.Error() + "\n"
	}
	type limits struct {
		Limits
		Timeout string
	}
	type plugin struct {
		Plugin
		StartTimeout string
	}
	view := struct {
		*Config
		Limits  limits
		Plugins []plugin
	}{Config: cfg, Limits: limits{cfg.Limits, cfg.Limits.Timeout.String()}}
	for _, p := range cfg.Plugins {
		view.Plugins = append(view.Plugins, plugin{p, p.StartTimeout.String()})
	}
	out, err := json.MarshalIndent(view, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(out), filepath.ToSlash(dir), "$DIR") + "\n"
}

func TestEnvOverrides(t *testing.T) {
	const file = "/srv/toolhost/config.hcl"
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		src     string
		env     map[string]string
		check   func(t *testing.T, c *Config)
		wantErr string
	}{{
		name: "defaults without overrides",
		env:  map[string]string{},
		check: func(t *testing.T, c *Config) {
			equal(t, "Listen", c.Listen, "127.0.0.1:8741")
			equal(t, "DataDir", c.DataDir, "/srv/toolhost/data")
			equal(t, "PluginDir", c.PluginDir, "/srv/toolhost/bin/plugins")
		},
	}, {
		name: "listen overrides file",
		src:  `listen = "127.0.0.1:1"`,
		env:  map[string]string{"TOOLHOST_LISTEN": ":9090", "TOOLHOST_TOKEN": "t0ken-from-the-environment"},
		check: func(t *testing.T, c *Config) {
			equal(t, "Listen", c.Listen, ":9090")
			equal(t, "Token", c.Auth.Token, "t0ken-from-the-environment")
		},
	}, {
		name: "a token overrides the file's",
		src:  `auth {` + "\n" + `token = "file"` + "\n" + `}`,
		env:  map[string]string{"TOOLHOST_TOKEN": "the-environment's-token"},
		check: func(t *testing.T, c *Config) {
			equal(t, "Token", c.Auth.Token, "the-environment's-token")
		},
	}, {
		name: "empty values do not override",
		src:  `listen = "127.0.0.1:1"` + "\n" + `data_dir = "d"`,
		env:  map[string]string{"TOOLHOST_LISTEN": "", "TOOLHOST_DATA_DIR": ""},
		check: func(t *testing.T, c *Config) {
			equal(t, "Listen", c.Listen, "127.0.0.1:1")
			equal(t, "DataDir", c.DataDir, "/srv/toolhost/d")
		},
	}, {
		name: "absolute dirs",
		src:  `data_dir = "d"` + "\n" + `plugin_dir = "p"`,
		env:  map[string]string{"TOOLHOST_DATA_DIR": "/var/lib/toolhost", "TOOLHOST_PLUGIN_DIR": "/opt/plugins/"},
		check: func(t *testing.T, c *Config) {
			equal(t, "DataDir", c.DataDir, "/var/lib/toolhost")
			equal(t, "PluginDir", c.PluginDir, "/opt/plugins")
		},
	}, {
		name: "relative dirs resolve against the working directory",
		env:  map[string]string{"TOOLHOST_DATA_DIR": "state", "TOOLHOST_PLUGIN_DIR": "./bin"},
		check: func(t *testing.T, c *Config) {
			equal(t, "DataDir", c.DataDir, filepath.Join(cwd, "state"))
			equal(t, "PluginDir", c.PluginDir, filepath.Join(cwd, "bin"))
		},
	}, {
		name: "plugin paths resolve against the overridden plugin dir",
		src: `plugin_dir = "ignored"
plugin "notes" { path = "notes/bin" }
plugin "abs" { path = "/usr/bin/abs" }
builtin "workspace" {}`,
		env: map[string]string{"TOOLHOST_PLUGIN_DIR": "plugins"},
		check: func(t *testing.T, c *Config) {
			equal(t, "notes.Path", c.Plugins[0].Path, filepath.Join(cwd, "plugins", "notes", "bin"))
			equal(t, "abs.Path", c.Plugins[1].Path, "/usr/bin/abs")
			equal(t, "workspace.Path", c.Plugins[2].Path, filepath.Join(cwd, "plugins", "workspace"))
		},
	}, {
		name: "website_url",
		src:  `website_url = "https://tools.example.com/about"`,
		check: func(t *testing.T, c *Config) {
			equal(t, "WebsiteURL", c.WebsiteURL, "https://tools.example.com/about")
		},
	}, {
		name: "deferred groups",
		src:  "role \"lazy\" {\n  tool_groups     = [\"workspace\", \"chrome\"]\n  deferred_groups = [\"chrome\"]\n}",
		check: func(t *testing.T, c *Config) {
			equal(t, "DeferredGroups", strings.Join(c.Roles[0].DeferredGroups, ","), "chrome")
		},
	}, {
		name:    "a deferred group must be one of the role's",
		src:     "role \"lazy\" {\n  tool_groups     = [\"workspace\"]\n  deferred_groups = [\"chrome\"]\n}",
		wantErr: `/srv/toolhost/config.hcl:3,21: Deferred group not in tool_groups: "chrome" is deferred but not one of the role's tool_groups; a deferred group is one of the role's groups whose tools are loaded on demand.`,
	}, {
		name: "strict audit",
		src:  "audit {\n  mode = \"strict\"\n}",
		check: func(t *testing.T, c *Config) {
			equal(t, "Audit.Mode", c.Audit.Mode, "strict")
		},
	}, {
		name:    "an unknown audit mode",
		src:     "audit {\n  mode = \"paranoid\"\n}",
		wantErr: `/srv/toolhost/config.hcl:2,10: Invalid value for "mode": "paranoid" is not one of default, strict.`,
	}, {
		name: "retention with the default export directory",
		src:  "audit {\n  retention = \"1d12h\"\n}",
		check: func(t *testing.T, c *Config) {
			equal(t, "Audit.Retention", c.Audit.Retention, 36*time.Hour)
			equal(t, "Audit.Export", c.Audit.Export, filepath.Join(c.DataDir, DefaultExportDir))
		},
	}, {
		name:    "a retention in weeks",
		src:     "audit {\n  retention = \"2w\"\n}",
		wantErr: `/srv/toolhost/config.hcl:2,15: Invalid value for "retention": "2w" is not a retention such as "90d", "36h" or "1d12h".`,
	}, {
		name: "telemetry",
		src:  "telemetry {\n  traces       = \"otlp\"\n  endpoint     = \"http://127.0.0.1:4318\"\n  protocol     = \"grpc\"\n  sample_ratio = 0.25\n  service_name = \"tools-eu\"\n}",
		check: func(t *testing.T, c *Config) {
			want := Telemetry{Traces: "otlp", Endpoint: "http://127.0.0.1:4318", Protocol: "grpc", SampleRatio: 0.25, ServiceName: "tools-eu"}
			equal(t, "Telemetry", c.Telemetry, want)
		},
	}, {
		name:    "a sample ratio is a fraction",
		src:     "telemetry {\n  traces       = \"otlp\"\n  sample_ratio = 2\n}",
		wantErr: `/srv/toolhost/config.hcl:3,18: Invalid value for "sample_ratio": 2 is not a fraction greater than 0 and at most 1.`,
	}, {
		name:    "an unknown traces exporter",
		src:     "telemetry {\n  traces = \"jaeger\"\n}",
		wantErr: `/srv/toolhost/config.hcl:2,12: Invalid value for "traces": "jaeger" is not one of otlp, console, none.`,
	}, {
		name: "a postgres store",
		src:  "store {\n  driver = \"postgres\"\n  dsn    = env(\"PG\")\n}",
		env:  map[string]string{"PG": "postgres://toolhost@db.internal/toolhost"},
		check: func(t *testing.T, c *Config) {
			equal(t, "Store", c.Store, Store{Driver: "postgres", DSN: "postgres://toolhost@db.internal/toolhost"})
		},
	}, {
		name: "TOOLHOST_STORE_DSN alone selects postgres",
		env:  map[string]string{"TOOLHOST_STORE_DSN": "host=127.0.0.1 dbname=toolhost"},
		check: func(t *testing.T, c *Config) {
			equal(t, "Store", c.Store, Store{Driver: "postgres", DSN: "host=127.0.0.1 dbname=toolhost"})
		},
	}, {
		name:    "a postgres store needs a DSN",
		src:     "store {\n  driver = \"postgres\"\n}",
		wantErr: `/srv/toolhost/config.hcl: Missing store DSN: store { driver = "postgres" } needs dsn (such as env("TOOLHOST_PG_DSN")) or TOOLHOST_STORE_DSN.`,
	}, {
		name:    "an unknown store driver",
		src:     "store {\n  driver = \"mysql\"\n}",
		wantErr: `/srv/toolhost/config.hcl:2,12: Invalid value for "driver": "mysql" is not one of sqlite, postgres.`,
	}, {
		name:    "website_url must be an http URL",
		src:     `website_url = "javascript:alert(1)"`,
		wantErr: `/srv/toolhost/config.hcl:1,15: Invalid value for "website_url": "javascript:alert(1)" is not an absolute http or https URL.`,
	}, {
		name:    "invalid listen",
		env:     map[string]string{"TOOLHOST_LISTEN": "localhost"},
		wantErr: `TOOLHOST_LISTEN: Invalid TOOLHOST_LISTEN: "localhost" is not host:port: address localhost: missing port in address.`,
	}, {
		name: "a public listen keeps auth on",
		env:  map[string]string{"TOOLHOST_LISTEN": "0.0.0.0:80"},
		check: func(t *testing.T, c *Config) {
			equal(t, "Listen", c.Listen, "0.0.0.0:80")
			equal(t, "Disabled", c.Auth.Disabled, false)
		},
	}, {
		name:    "auth cannot be disabled on a public listen",
		src:     "auth {\n  disabled = true\n}",
		env:     map[string]string{"TOOLHOST_LISTEN": "0.0.0.0:80"},
		wantErr: `/srv/toolhost/config.hcl: Unsafe authentication: listen "0.0.0.0:80" is not a loopback address, and auth { disabled = true } would open every route to the network: remove disabled, or listen on 127.0.0.1.`,
	}, {
		name:    "a short token from the environment",
		env:     map[string]string{"TOOLHOST_TOKEN": "short"},
		wantErr: `/srv/toolhost/config.hcl: Unsafe authentication: the admin token (auth { token } or TOOLHOST_TOKEN) has 5 characters, fewer than 16: use a long random one (for example openssl rand -hex 32), or remove it to use the generated one.`,
	}, {
		name:    "a token beside disabled",
		src:     "auth {\n  disabled = true\n}",
		env:     map[string]string{"TOOLHOST_TOKEN": "a-long-enough-token-123"},
		wantErr: `/srv/toolhost/config.hcl: Unsafe authentication: auth { disabled = true } and a token (auth { token } or TOOLHOST_TOKEN) contradict each other: remove one.`,
	}, {
		name:    "invalid listen port",
		env:     map[string]string{"TOOLHOST_LISTEN": "localhost:http"},
		wantErr: `TOOLHOST_LISTEN: Invalid TOOLHOST_LISTEN: "localhost:http": the port must be a number from 0 to 65535.`,
	}, {
		name: "invalid listen reported after file errors",
		src:  `listen = 1`,
		env:  map[string]string{"TOOLHOST_LISTEN": "nope"},
		wantErr: "/srv/toolhost/config.hcl:1,10: Invalid value for \"listen\": \"1\" is not host:port: address 1: missing port in address.\n" +
			`TOOLHOST_LISTEN: Invalid TOOLHOST_LISTEN: "nope" is not host:port: address nope: missing port in address.`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.src), file, &Options{Getenv: getenv(tt.env)})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error:\n got %v\nwant %s", err, tt.wantErr)
				}
				if c != nil {
					t.Errorf("Config %+v returned with an error", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoad(t *testing.T) {
	t.Setenv("TOOLHOST_LISTEN", "")
	t.Setenv("TOOLHOST_DATA_DIR", "")
	t.Setenv("TOOLHOST_PLUGIN_DIR", "")
	c, err := Load(filepath.Join("testdata", "empty.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "Timeout", c.Limits.Timeout, 30*time.Second)
	if _, err := Load(filepath.Join("testdata", "missing.hcl")); err == nil || !strings.HasPrefix(err.Error(), "config: ") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
