package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/disktest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
)

// TestProbesWithTheDiskFull: with its data directory's file system full, a
// host in the default audit mode goes on answering calls; /readyz stays 200
// and names the events check, /metrics shows toolhost_store_down for
// disk_full; in strict mode, /readyz is 503 and says why. Once space is
// back, both are as before. (host's TestDiskFull* check the calls and the
// events themselves.)
func TestProbesWithTheDiskFull(t *testing.T) {
	mnt := disktest.Mount(t, "4m")
	group := &sdk.Group{ID: "console", Description: "Console.", Tools: []sdk.Tool{
		sdk.NewTool("console_print", "Print.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return &sdk.Result{OK: true}, nil }),
	}}
	def, _ := serve(t, &config.Config{DataDir: filepath.Join(mnt, "default")}, group)
	strict, _ := serve(t, &config.Config{DataDir: filepath.Join(mnt, "strict"), Audit: config.Audit{Mode: "strict"}}, group)
	ready := func(srv string) (int, map[string]any) {
		var body map[string]any
		return get(t, srv+"/readyz", &body), body
	}
	callOnce := func(srv string) int {
		resp, err := http.Post(srv+"/api/call", "application/json", strings.NewReader(`{"tool":"console_print"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code, body := ready(def.URL); code != 200 || body["degraded"] != nil {
		t.Fatalf("readyz before the disk fills: %d %v", code, body)
	}

	fill := disktest.Fill(t, mnt)
	proctest.Eventually(t, "the default host's readyz names the full disk", func() bool {
		if code := callOnce(def.URL); code != 200 {
			t.Fatalf("a call on the default host with the disk full: %d", code)
		}
		code, body := ready(def.URL)
		if code != 200 {
			t.Fatalf("readyz of the default host with the disk full: %d %v", code, body)
		}
		d, _ := json.Marshal(body["degraded"])
		return strings.Contains(string(d), "disk is full")
	})
	if v := series(scrape(t, http.DefaultClient, def.URL), "toolhost_store_down"); v["reason=disk_full"] != 1 || v["reason=unavailable"] != 0 {
		t.Errorf("toolhost_store_down with the disk full: %v", v)
	}
	proctest.Eventually(t, "the strict host's readyz is 503", func() bool {
		callOnce(strict.URL)
		code, body := ready(strict.URL)
		return code == 503 && strings.Contains(body["reason"].(string), "disk is full")
	})

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "both are ready again once space is back", func() bool {
		dc, db := ready(def.URL)
		sc, _ := ready(strict.URL)
		return dc == 200 && db["degraded"] == nil && sc == 200
	})
	if v := series(scrape(t, http.DefaultClient, def.URL), "toolhost_store_down"); v["reason=disk_full"] != 0 {
		t.Errorf("toolhost_store_down with space back: %v", v)
	}
}
