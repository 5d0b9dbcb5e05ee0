// Command testqdrant serves the in-process Qdrant of package qdranttest over
// gRPC, so that several Breakwater processes in a test can share one
// semantic tier where a real Qdrant cannot run:
//
//	go run ./cache/qdrant/qdranttest/cmd/testqdrant -listen 127.0.0.1:6334
//
// It is a test stand-in, never a store: everything is kept in memory, lost
// when the process exits, bounded by -max-points (upserts beyond it fail as a
// full Qdrant's would), and searches are exact scans. It implements only the
// calls cache/qdrant makes; anything else fails with Unimplemented. It
// listens on loopback addresses only.
//
// It prints "testqdrant listening on ADDR" once it serves, and stops on
// SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/breakwater-dev/breakwater/cache/qdrant/qdranttest"
)

func main() {
	log.SetFlags(0)
	if err := run(os.Args[1:]); err != nil {
		log.Fatal("testqdrant: ", err) // exits 1
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("testqdrant", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:6334", "loopback host:port to serve Qdrant's gRPC API on (port 0 picks one)")
	maxPoints := fs.Int("max-points", 100_000, "most points held over all collections (in memory); must be positive")
	apiKey := fs.String("api-key", "", "reject calls without this api-key header, as Qdrant with QDRANT__SERVICE__API_KEY")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *maxPoints <= 0 {
		return fmt.Errorf("-max-points = %d: must be positive (the fake keeps every point in memory)", *maxPoints)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("-listen = %q: %w", *listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-listen = %q: a test stand-in listens on loopback only (127.0.0.0/8, ::1, localhost)", *listen)
	}
	opts := []qdranttest.Option{qdranttest.WithMaxPoints(*maxPoints)}
	if *apiKey != "" {
		opts = append(opts, qdranttest.WithAPIKey(*apiKey))
	}
	s, err := qdranttest.Serve(*listen, opts...)
	if err != nil {
		return err
	}
	fmt.Printf("testqdrant listening on %s\n", s.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.Stop()
	return nil
}
