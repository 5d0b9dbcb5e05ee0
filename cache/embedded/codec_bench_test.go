package embedded

import (
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

// BenchmarkEncodeUpsert is the log record of one semantic miss's
// write-back: a 1.4 KB answer and a 512-dimension vector.
func BenchmarkEncodeUpsert(b *testing.B) {
	vec := make([]float32, 512)
	for i := range vec {
		vec[i] = float32(i) / 512
	}
	now := time.Unix(1700000000, 0)
	items := []cache.IndexItem{{Entry: cache.Entry{
		Key: "k0123456789abcdef0123456789abcdef", Partition: "p0123456789abcdef", Fingerprint: "f0123456789abcdef",
		Query: "How do I parse JSON file number 12 in Go quickly?", Model: "gpt-test",
		Body: make([]byte, 1400), Created: now, Expires: now.Add(time.Hour),
	}, Vector: vec}}
	b.ReportAllocs()
	for b.Loop() {
		if len(encodeUpsert(items)) < 4*512 {
			b.Fatal("short record")
		}
	}
}
