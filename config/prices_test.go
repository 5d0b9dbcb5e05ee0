package config

import (
	"math"
	"strings"
	"testing"
)

// TestModelPrices: a [[models]] entry's price applies to its targets that
// send its own name, [prices] names any upstream model and wins.
func TestModelPrices(t *testing.T) {
	c := mustLoad(t, writeFile(t, `
[[upstreams]]
name = "a"
base_url = "http://127.0.0.1:1/v1"

[[models]]
name = "big"
input_price = 3.0
output_price = 15.0
targets = [{ upstream = "a" }, { upstream = "a", model = "small", priority = 1 }]

[[models]]
name = "free"
targets = [{ upstream = "a" }]

[prices]
"small" = { input = 0.25, output = 1.25 }
"local" = { input = 0, output = 0 }
`), nil)
	got := c.ModelPrices()
	want := map[string]Price{"big": {3, 15}, "small": {0.25, 1.25}, "local": {0, 0}}
	if len(got) != len(want) {
		t.Fatalf("prices = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("price of %s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["free"]; ok {
		t.Error("a model without a price has one")
	}
}

func TestPricesAndTracingValidated(t *testing.T) {
	c := validConfig()
	c.Prices = map[string]Price{"m": {Input: -1, Output: math.Inf(1)}}
	c.Models[0].OutputPrice = math.NaN()
	c.Tracing.Endpoint = "127.0.0.1:4318"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	for _, key := range []string{`prices."m".input`, `prices."m".output`, "models[0].output_price", "tracing.endpoint"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() does not name %s:\n%v", key, err)
		}
	}
	c = validConfig()
	c.Tracing.Endpoint = "http://127.0.0.1:4318"
	c.Prices = map[string]Price{"m": {Input: 0.1, Output: 0.4}}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}
