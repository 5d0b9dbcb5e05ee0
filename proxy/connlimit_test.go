package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// At the connection limit a new connection closes the idle one, never the
// one in a request: with two slots, one held by a request the handler keeps
// waiting and one idle keep-alive, a third client is served, the idle one is
// closed and the waiting request still gets its answer.
func TestConnLimitClosesTheIdleNotTheBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	srv := &http.Server{
		ConnState: trackConnState,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				arrived <- struct{}{}
				<-release
			}
			io.WriteString(w, "ok")
		}),
	}
	m := NewMetrics(prometheus.NewRegistry())
	go srv.Serve(newConnLimit(ln, 2, m))
	t.Cleanup(func() { srv.Close() })

	get := func(c net.Conn, br *bufio.Reader, path string) (int, error) {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a hang fails, it does not time the test
		return c, bufio.NewReader(c)
	}

	busy, busyR := dial()
	held := make(chan int, 1)
	go func() {
		status, _ := get(busy, busyR, "/hold")
		held <- status
	}()
	<-arrived

	idle, idleR := dial()
	if status, err := get(idle, idleR, "/ok"); err != nil || status != 200 {
		t.Fatalf("the second client: %d %v", status, err)
	}

	third, thirdR := dial()
	if status, err := get(third, thirdR, "/ok"); err != nil || status != 200 {
		t.Fatalf("the third client at the limit: %d %v", status, err)
	}
	if _, err := idleR.ReadByte(); err == nil {
		t.Error("the idle keep-alive connection is still open after a third client took its slot")
	}
	close(release)
	if status := <-held; status != 200 {
		t.Errorf("the request in progress got %d, want its answer (200)", status)
	}
	if got := testutil.ToFloat64(m.Limits.WithLabelValues("server.max_connections")); got != 1 {
		t.Errorf("breakwater_limits_reached_total{limit=server.max_connections} = %v, want 1", got)
	}
}
