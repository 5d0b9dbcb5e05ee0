// Package redistest runs a real redis-server for tests: Debian's binary
// (apt-get install redis-server; .ci/run installs it), on a free loopback
// port, without persistence. A test skips, saying why, only when no server
// can be started.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is one redis-server process.
type Server struct {
	Addr string
	bin  string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// Start runs redis-server (REDIS_SERVER, else redis-server on PATH, else
// /usr/bin/redis-server) until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Run()
	if err != nil {
		skip(t, "no redis-server could be started (%v); apt-get install -y redis-server, and set CI=1 to make its absence a failure instead of a skip", err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Run starts redis-server as Start does, outside a test (demo -redis);
// the caller Kills it.
func Run() (*Server, error) {
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		if p, err := exec.LookPath("redis-server"); err == nil {
			bin = p
		} else {
			bin = "/usr/bin/redis-server"
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no redis-server to start (%v): apt-get install redis-server, or set REDIS_SERVER", err)
	}
	// redis-server cannot listen on port 0 and report the port: take a
	// free one and hand it over.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{Addr: addr, bin: bin}
	if err := s.start(); err != nil {
		return nil, fmt.Errorf("redis-server did not start: %w", err)
	}
	return s, nil
}

// skip skips the test, or fails it under CI (CI set), where .ci/run
// installs the server.
func skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

func (s *Server) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command(s.bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", os.TempDir(), "--loglevel", "warning")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if log.Len() < 4096 {
				log.WriteString(sc.Text() + "\n")
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	// Ready when it answers PING.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr) == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("no PONG on %s within 10s", s.Addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	return nil
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Kill ends the server at once (SIGKILL); its data goes with it.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// Restart starts the server again on its address, retrying while the
// kernel holds the port.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	var err error
	for range 200 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("redis-server did not restart on %s: %v", s.Addr, err)
}

// Delay is a TCP proxy in front of a server that holds every chunk it
// relays for its delay, in both directions: a slow network or a slow
// Redis, as the client sees it.
type Delay struct {
	Addr string
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	d    time.Duration
}

// NewDelay proxies to target with no delay until Set; it closes when the
// test ends.
func NewDelay(t testing.TB, target string) *Delay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Delay{Addr: ln.Addr().String(), ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.wg.Add(2)
			go p.pipe(c, up)
			go p.pipe(up, c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

// Set changes the delay of every chunk relayed from now on.
func (p *Delay) Set(d time.Duration) {
	p.mu.Lock()
	p.d = d
	p.mu.Unlock()
}

func (p *Delay) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.d
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d) // the injected latency itself, not a synchronisation
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
