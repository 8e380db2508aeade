package reference

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Command is what the reference server commands (dev/cmd/localeflow-cms,
// dev/cmd/localeflow-evidence) share: the -addr, -key-hex and fault flags, and
// serving until their context ends.
type Command struct {
	// Flags is the command's flag set; register its own flags on it
	// before Parse.
	Flags  *flag.FlagSet
	Faults Faults
	// Breaks are the -break names (comma separated): contract violations
	// on purpose, to try a conformance checker by hand.
	Breaks Breaks
	breaks *string
	what   string
	keyEnv string
	addr   *string
	keyHex *string
}

// NewCommand returns a command named name whose log lines start with what
// ("reference CMS"), with -addr (default addr), -key-hex (default $keyEnv)
// and the fault flags registered.
func NewCommand(name, what, addr, keyEnv string) *Command {
	c := &Command{Flags: flag.NewFlagSet(name, flag.ContinueOnError), what: what, keyEnv: keyEnv}
	c.addr = c.Flags.String("addr", addr, "listen address (loopback only)")
	c.keyHex = c.Flags.String("key-hex", "", "HMAC key shared with localeflow, hex (default $"+keyEnv+")")
	FaultFlags(c.Flags, &c.Faults)
	c.breaks = c.Flags.String("break", "", "violate the contract on purpose, comma separated (conformance tests only; names: dev/reference Breaks)")
	return c
}

// Parse parses args and returns the HMAC key (hex, at least 16 bytes).
func (c *Command) Parse(args []string, getenv func(string) string) ([]byte, error) {
	if err := c.Flags.Parse(args); err != nil {
		return nil, err
	}
	if *c.breaks != "" {
		c.Breaks = strings.Split(*c.breaks, ",")
		if err := c.Breaks.Validate(); err != nil {
			return nil, err
		}
	}
	return HexKey(*c.keyHex, c.keyEnv, getenv, 16)
}

// Serve serves h on -addr and logs one JSON line "<what> ready" to out
// (url, then ready's attributes, latency and failure_rate); when ctx ends
// it stops the server and logs "<what> stopped" with stopped's attributes.
func (c *Command) Serve(ctx context.Context, h http.Handler, out io.Writer, ready []any, stopped func() []any) error {
	srv, err := Serve(*c.addr, h)
	if err != nil {
		return err
	}
	defer srv.Close()
	log := slog.New(slog.NewJSONHandler(out, nil))
	attrs := append(append([]any{"url", srv.URL}, ready...), "latency", c.Faults.Latency.String(), "failure_rate", c.Faults.FailureRate)
	log.Info(c.what+" ready", attrs...)
	<-ctx.Done()
	log.Info(c.what+" stopped", stopped()...)
	return nil
}

// Main calls run with the process's arguments, environment and stdout and
// a context that ends on SIGINT or SIGTERM; an error is printed as
// "name: error" and exits with status 2.
func Main(name string, run func(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
}
