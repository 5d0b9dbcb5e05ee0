package app

import (
	"io"
	"sync"
	"time"
)

// Log buffering bounds: lines wait at most logFlushEvery, a flush starts
// early at logFlushBytes, and a writer that falls logMaxPending behind is
// written by the logging goroutine itself (back-pressure, nothing dropped).
const (
	logFlushEvery = 100 * time.Millisecond
	logFlushBytes = 64 << 10
	logMaxPending = 1 << 20
)

// logBuffer is the process log's writer. A request's log line is copied
// into memory under a short lock and written out by one goroutine, so the
// request path never waits for a write(2) to stderr — nor, behind slog's
// handler mutex, for another request's.
type logBuffer struct {
	w    io.Writer
	wmu  sync.Mutex // serialises writes to w
	mu   sync.Mutex // guards buf
	buf  []byte
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newLogBuffer(w io.Writer) *logBuffer {
	b := &logBuffer{w: w, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// Write buffers p (slog writes one whole line per call).
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	if len(b.buf)+len(p) > logMaxPending {
		b.mu.Unlock()
		b.Flush()
		b.mu.Lock()
	}
	b.buf = append(b.buf, p...)
	full := len(b.buf) >= logFlushBytes
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Flush writes out what is buffered.
func (b *logBuffer) Flush() {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.mu.Lock()
	out := b.buf
	b.buf = nil
	b.mu.Unlock()
	if len(out) > 0 {
		_, _ = b.w.Write(out)
	}
}

func (b *logBuffer) loop() {
	defer close(b.done)
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.kick:
		case <-b.stop:
			b.Flush()
			return
		}
		b.Flush()
	}
}

// Close flushes and stops the writing goroutine. Writes after Close stay
// buffered until a Flush, so Close comes last.
func (b *logBuffer) Close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}
