// Command localeflow-forward forwards TCP connections through a Unix socket
// into or out of the local stack's private network namespace (package
// dev/forward; README.md, "Running one function locally"):
//
//	outside: localeflow-forward -listen unix:/tmp/cms.sock -to tcp:cms.dev.example:8080
//	inside:  localeflow-forward -listen tcp:127.0.0.1:9100 -to unix:/tmp/cms.sock
//
// It runs until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/localeflow/localeflow/dev/forward"
)

func main() {
	listen := flag.String("listen", "", "tcp:127.0.0.1:PORT or unix:PATH")
	to := flag.String("to", "", "tcp:HOST:PORT or unix:PATH")
	flag.Parse()
	if err := run(*listen, *to); err != nil {
		fmt.Fprintln(os.Stderr, "localeflow-forward:", err)
		os.Exit(1)
	}
}

func run(listen, to string) error {
	from, err := forward.Parse(listen)
	if err != nil {
		return err
	}
	dst, err := forward.Parse(to)
	if err != nil {
		return err
	}
	ln, err := forward.Listen(from)
	if err != nil {
		return err
	}
	if from.Network == "unix" {
		defer os.Remove(from.Address)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "localeflow-forward: %s -> %s\n", from, dst)
	return forward.Serve(ctx, ln, dst)
}
