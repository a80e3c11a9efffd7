package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The storage quotas' defaults ([Store.Quota] and [Store.RoleQuota] left 0):
// 1 GiB in all, which a laptop spares without notice, and a quarter of it
// per role, so that one role in a loop (an agent saving 16 MiB outputs
// call after call) evicts only its own items and leaves the other roles
// three quarters.
const (
	DefaultQuota     int64 = 1 << 30
	DefaultRoleQuota int64 = 256 << 20
)

// QuotaOff is a quota of quota = "off": no bound.
const QuotaOff int64 = -1

// sizeUnits are the units a byte size may carry, as multipliers.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// quotaSize reads a quota: a byte size such as "512MiB", "2GB" or 1048576
// (bytes), or "off" for no bound ([QuotaOff]). 0 is refused, being either
// "keep nothing" or "no bound" depending on who reads it.
func quotaSize(s string) (int64, error) {
	if strings.EqualFold(strings.TrimSpace(s), "off") {
		return QuotaOff, nil
	}
	size, err := byteSize(s, ", nor \"off\"")
	if err == nil && size < 1 {
		err = fmt.Errorf("%q keeps nothing: write \"off\" for no bound, or a size of at least 1 byte", s)
	}
	return size, err
}

// byteSize reads a byte size such as "512MiB", "2GB", "1.5GiB" or 1048576
// (bytes), rounded down to a whole byte; or says what s is not, ending
// with alsoNot (the other words its attribute takes).
func byteSize(s, alsoNot string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult, ok := sizeUnits[unit]
	n, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a byte size such as \"1GiB\", \"256MiB\" or \"500MB\"%s", s, alsoNot)
	}
	size := n * float64(mult)
	if size >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(size), nil
}

// memoryBudget reads the gc block's memory_budget: a byte size of at least
// [MinGCMemoryBudget].
// maxGCPercent bounds gc { percent }: the runtime holds a percent in 32
// bits, and one past them would turn the collector off (1000 × already
// lets a live heap of 10 MiB grow by 10 GiB before a collection).
const maxGCPercent = 100_000

// gcPercent is a gc block's percent: 1 to maxGCPercent.
func gcPercent(n int) (int, error) {
	if n <= 0 || n > maxGCPercent {
		return 0, fmt.Errorf("%d is not a percent from 1 to %d", n, maxGCPercent)
	}
	return n, nil
}

func memoryBudget(s string) (int64, error) {
	size, err := byteSize(s, "")
	if err == nil && size < MinGCMemoryBudget {
		err = fmt.Errorf("%q is less than serve alone takes: write at least \"64MiB\"", s)
	}
	return size, err
}
