// Command floor is the least a Go proxy can do per request: read the body,
// send it upstream, write the answer back, nothing else. scripts/pinned.sh
// -floor runs it beside nginx and Breakwater to show what the HTTP stack
// alone costs: "nethttp" is the standard library's server and client (what
// Breakwater is built on), "fasthttp" is github.com/valyala/fasthttp's, and
// "nethttp-fastclient" the standard library's server with fasthttp's client.
// "nethttp-stored" is the least an exact hit can be on the standard library:
// read the body, write back an answer fetched once at start, with no key, no
// lookup and no log. It is its own module so that the sidecar does not
// depend on fasthttp.
//
// Usage: floor nethttp|fasthttp|nethttp-fastclient|nethttp-stored LISTEN UPSTREAM_HOST:PORT
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/valyala/fasthttp"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) != 4 {
		log.Fatal("usage: floor nethttp|fasthttp|nethttp-fastclient|nethttp-stored LISTEN UPSTREAM_HOST:PORT")
	}
	mode, listen, up := os.Args[1], os.Args[2], os.Args[3]
	var err error
	switch mode {
	case "nethttp":
		err = http.ListenAndServe(listen, netHTTP(up))
	case "fasthttp":
		err = (&fasthttp.Server{Handler: fastHTTP(up)}).ListenAndServe(listen)
	case "nethttp-fastclient":
		err = http.ListenAndServe(listen, netHTTPFastClient(up))
	case "nethttp-pool":
		err = http.ListenAndServe(listen, netHTTPPool(up))
	case "nethttp-stored":
		var h http.HandlerFunc
		if h, err = netHTTPStored(up); err == nil {
			err = http.ListenAndServe(listen, h)
		}
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	log.Fatal(err) // a server's Listen returns only on error
}

func netHTTP(up string) http.HandlerFunc {
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+up+r.URL.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}
}

func fastHTTP(up string) fasthttp.RequestHandler {
	c := &fasthttp.HostClient{Addr: up, MaxConns: 256}
	return func(ctx *fasthttp.RequestCtx) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://" + up + string(ctx.Path()))
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.SetContentType("application/json")
		req.Header.SetBytesV("Authorization", ctx.Request.Header.Peek("Authorization"))
		req.SetBody(ctx.PostBody())
		if err := c.Do(req, resp); err != nil {
			ctx.SetStatusCode(fasthttp.StatusBadGateway)
			return
		}
		ctx.SetStatusCode(resp.StatusCode())
		ctx.SetContentTypeBytes(resp.Header.ContentType())
		ctx.SetBody(resp.Body())
	}
}

func netHTTPFastClient(up string) http.HandlerFunc {
	c := &fasthttp.HostClient{Addr: up, MaxConns: 256}
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://" + up + r.URL.Path)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.SetContentType("application/json")
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		req.SetBody(body)
		if err := c.Do(req, resp); err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", string(resp.Header.ContentType()))
		w.WriteHeader(resp.StatusCode())
		_, _ = w.Write(resp.Body())
	}
}

// netHTTPStored fetches one answer from the upstream and serves it to every
// request, after reading the request's body as a cache must to key it.
func netHTTPStored(up string) (http.HandlerFunc, error) {
	resp, err := http.Post("http://"+up+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(`{}`)))
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	ctype := resp.Header.Get("Content-Type")
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", ctype)
		_, _ = w.Write(answer)
	}, nil
}

// netHTTPPool is the standard library's server with a connection pool of its
// own: the request written and the answer read in the handler's goroutine
// (http.Request.Write, http.ReadResponse), no transport goroutines.
func netHTTPPool(up string) http.HandlerFunc {
	type pconn struct {
		c  net.Conn
		br *bufio.Reader
		bw *bufio.Writer
	}
	var mu sync.Mutex
	var idle []*pconn
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		var pc *pconn
		if n := len(idle); n > 0 {
			pc, idle = idle[n-1], idle[:n-1]
		}
		mu.Unlock()
		if pc == nil {
			c, err := net.Dial("tcp", up)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			pc = &pconn{c: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+up+r.URL.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		if err := req.Write(pc.bw); err == nil {
			err = pc.bw.Flush()
		}
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			pc.c.Close()
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.Close {
			pc.c.Close()
		} else {
			mu.Lock()
			idle = append(idle, pc)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}
}
