package logtest

import (
	"log/slog"
	"sync"
	"testing"
)

func TestBufferLines(t *testing.T) {
	var b Buffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { log.Info("request", "n", i) })
	}
	wg.Wait()
	log.Warn("other")
	_, _ = b.Write([]byte("not json\n"))
	if got := len(b.Lines("request")); got != 8 {
		t.Errorf("Lines(request) = %d lines, want 8", got)
	}
	if got := len(b.Lines("")); got != 9 {
		t.Errorf("Lines(\"\") = %d lines, want 9 (the line that is not JSON left out)", got)
	}
}
