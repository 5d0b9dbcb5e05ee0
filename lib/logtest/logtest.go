// Package logtest captures log output for tests that read it back.
package logtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// Buffer is an io.Writer safe for the goroutines that log to it while a
// test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines decodes the JSON lines written so far (slog's JSON handler writes
// one object per line) whose "msg" is msg, or every line when msg is "".
// Lines that are not JSON objects are left out.
func (b *Buffer) Lines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && (msg == "" || m["msg"] == msg) {
			out = append(out, m)
		}
	}
	return out
}
