package proxy

import (
	"errors"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/lib/setting"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire/apis"
)

// The proxy's options validate themselves, naming the configuration key,
// and New refuses what Validate refuses.
func TestOptionsValidate(t *testing.T) {
	caller, err := upstream.New(upstream.Options{
		Upstreams:       []upstream.Upstream{{Name: "u", BaseURL: "http://127.0.0.1:1/v1"}},
		DefaultUpstream: "u",
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		key  string // "": valid
	}{
		{"zero", Options{}, ""},
		{"edges", Options{CacheOptions: CacheOptions{MaxTemperature: 2, StaleThreshold: 1, EndUserHeader: "X-End-User-ID"}}, ""},
		{"negative read_header_timeout", Options{ServerOptions: ServerOptions{ReadHeaderTimeout: -time.Second}}, "server.read_header_timeout"},
		{"end_user_header with a space", Options{CacheOptions: CacheOptions{EndUserHeader: "X End User"}}, "cache.end_user_header"},
		{"max_temperature above 2", Options{CacheOptions: CacheOptions{MaxTemperature: 2.5}}, "cache.max_temperature"},
		{"negative max_temperature", Options{CacheOptions: CacheOptions{MaxTemperature: -1}}, "cache.max_temperature"},
		{"stale_threshold above 1", Options{CacheOptions: CacheOptions{StaleThreshold: 1.5}}, "cache.stale_threshold"},
		{"negative stale_threshold", Options{CacheOptions: CacheOptions{StaleThreshold: -1}}, "cache.stale_threshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			var se *setting.Error
			switch {
			case tt.key == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.key != "" && (!errors.As(err, &se) || se.Key != tt.key || len(setting.List(err)) != 1):
				t.Fatalf("Validate() = %v, want one problem naming %s", err, tt.key)
			}
			tt.opts.Caller, tt.opts.APIs = caller, apis.All
			s, err := New(tt.opts)
			if s != nil {
				s.Close()
			}
			if got := err != nil; got != (tt.key != "") {
				t.Errorf("New() error = %v, want an error: %v", err, tt.key != "")
			}
		})
	}
}
