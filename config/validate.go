package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The converters below check a decoded attribute value and turn it into its Config form.
// Their errors become the detail of a diagnostic at the attribute's value.

var (
	nameRE     = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	envKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sha256RE   = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	toolNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// builtinNames are the labels a builtin block may have.
var builtinNames = []string{"workspace", "command", "network"}

var restartPolicies = []RestartPolicy{RestartAlways, RestartOnFailure, RestartNever}

func checkName(kind Kind, name string) error {
	if kind == KindBuiltin {
		if !slices.Contains(builtinNames, name) {
			return fmt.Errorf("%q is not a builtin module; the builtins are %s", name, strings.Join(builtinNames, ", "))
		}
		return nil
	}
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%q must start with a lower-case letter and continue with up to 63 lower-case letters, digits, '_' or '-'", name)
	}
	return nil
}

func listenAddr(s string) (string, error) {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port: %v", s, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("%q: the port must be a number from 0 to 65535", s)
	}
	return s, nil
}

func nonEmpty(s string) (string, error) {
	if s == "" {
		return "", errors.New("the path must not be empty")
	}
	return s, nil
}

// path resolves a non-empty path against the file's directory.
func (d *decoder) path(s string) (string, error) {
	if _, err := nonEmpty(s); err != nil {
		return "", err
	}
	return resolve(d.dir, s), nil
}

func asIs[T any](v T) (T, error) { return v, nil }

func envMap(env map[string]string) (map[string]string, error) {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !envKeyRE.MatchString(k) {
			return nil, fmt.Errorf("%q is not a valid environment variable name: use letters, digits and '_', not starting with a digit", k)
		}
	}
	return env, nil
}

func sha256Hex(s string) (string, error) {
	if !sha256RE.MatchString(s) {
		return "", fmt.Errorf("%q is not a SHA-256 digest: it must be 64 hexadecimal digits", s)
	}
	return strings.ToLower(s), nil
}

func restartPolicy(s string) (RestartPolicy, error) {
	if p := RestartPolicy(s); slices.Contains(restartPolicies, p) {
		return p, nil
	}
	return "", fmt.Errorf("%q is not one of always, on-failure, never", s)
}

func positive(n int) (int, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%d must be greater than 0", n)
	}
	return n, nil
}

func nonNegative(n int) (int, error) {
	if n < 0 {
		return 0, fmt.Errorf("%d must not be negative", n)
	}
	return n, nil
}

// ratio accepts a fraction in (0, 1].
func ratio(f float64) (float64, error) {
	if !(f > 0 && f <= 1) {
		return 0, fmt.Errorf("%v is not a fraction greater than 0 and at most 1", f)
	}
	return f, nil
}

func duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"30s\" or \"1m30s\"", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be greater than 0", s)
	}
	return d, nil
}

// maxRetentionDays bounds the days of a retention, far from time.Duration's
// range.
const maxRetentionDays = 36500

// retention accepts audit's retention: a whole number of days ("90d"),
// optionally followed by a Go duration ("1d12h"), or a Go duration alone
// ("36h"); at least an hour.
func retention(s string) (time.Duration, error) {
	return retentionAtLeast(s, time.Hour, "an hour")
}

// agentRetention accepts the store block's agent_retention: a retention
// of at least a second.
func agentRetention(s string) (time.Duration, error) {
	return retentionAtLeast(s, time.Second, "a second")
}

// retentionAtLeast reads a retention as retention does, of at least least
// (said in words as least's name).
func retentionAtLeast(s string, least time.Duration, name string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a retention such as \"90d\", \"36h\" or \"1d12h\"", s)
	var d time.Duration
	rest := s
	if days, after, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > maxRetentionDays {
			return 0, bad
		}
		d, rest = time.Duration(n)*24*time.Hour, after
	}
	if rest != "" || d == 0 {
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, bad
		}
		d += r
	}
	if d < least {
		return 0, fmt.Errorf("%q is shorter than %s", s, name)
	}
	return d, nil
}

// oneOf accepts only the given strings.
func oneOf(allowed ...string) func(string) (string, error) {
	return func(s string) (string, error) {
		if !slices.Contains(allowed, s) {
			return "", fmt.Errorf("%q is not one of %s", s, strings.Join(allowed, ", "))
		}
		return s, nil
	}
}

// hostNames checks auth's allowed_hosts: host names or IP addresses, without
// port or scheme, lower-cased.
func hostNames(hosts []string) ([]string, error) {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
			out[i] = ip.String()
			continue
		}
		if !hostNameRE.MatchString(h) {
			return nil, fmt.Errorf("%q is not a host name or an IP address (no scheme, port or wildcard)", hosts[i])
		}
		out[i] = h
	}
	return out, nil
}

// hostNameRE matches a DNS name: dot-separated labels of letters, digits and
// inner hyphens.
var hostNameRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
