// Package forward copies TCP streams between a listener and a dialed
// address, so the local functions, which run inside the local stack's
// private network namespace (loopback only), can reach a team's own dev
// CMS outside it. A Unix socket is a file, visible in every network
// namespace: the outer half listens on it and dials the CMS; the inner half
// listens on 127.0.0.1 in the namespace and dials the socket. Bytes are
// copied unchanged (TLS stays end to end).
package forward

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// Endpoint is "tcp:HOST:PORT" or "unix:PATH".
type Endpoint struct {
	Network, Address string
}

// Parse reads an endpoint.
func Parse(s string) (Endpoint, error) {
	network, address, ok := strings.Cut(s, ":")
	if !ok || address == "" || (network != "tcp" && network != "unix") {
		return Endpoint{}, fmt.Errorf("endpoint %q: want tcp:HOST:PORT or unix:PATH", s)
	}
	return Endpoint{network, address}, nil
}

func (e Endpoint) String() string { return e.Network + ":" + e.Address }

// Listen listens on e; a TCP listener must be a loopback address.
func Listen(e Endpoint) (net.Listener, error) {
	if e.Network == "tcp" {
		host, _, err := net.SplitHostPort(e.Address)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("listen %s: only a loopback address (the forward is for this machine only)", e)
		}
	}
	return net.Listen(e.Network, e.Address)
}

// Serve accepts connections on ln until ctx ends and copies each one both
// ways to a new connection to to. It returns nil when ctx ends.
func Serve(ctx context.Context, ln net.Listener, to Endpoint) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var dialer net.Dialer
	for {
		in, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer in.Close()
			out, err := dialer.DialContext(ctx, to.Network, to.Address)
			if err != nil {
				return
			}
			defer out.Close()
			pipe(ctx, in, out)
		}()
	}
}

// pipe copies both ways until both directions are done (or ctx ends).
func pipe(ctx context.Context, a, b net.Conn) {
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if hc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(a, b)
	go copyHalf(b, a)
	for range 2 {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}
