// Command api runs the order service and its operator subcommands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

// cli is the command line: flags, their environment variables and defaults.
type cli struct {
	Version kong.VersionFlag `help:"Print the version, the commit it was built from and the Go version, and exit."`

	Serve       serveCmd       `cmd:"" default:"withargs" help:"Run the HTTP service (the default)."`
	Keys        keysCmd        `cmd:"" help:"Manage API keys."`
	Projections projectionsCmd `cmd:"" help:"Projection status and rebuilds, through a running service; exports as of a point of the log."`
	Audit       auditCmd       `cmd:"" help:"Order history, state at any point, export and verification of the log."`
	Webhooks    webhooksCmd    `cmd:"" help:"Webhook endpoints and their deliveries, through a running service."`
	Store       storeCmd       `cmd:"" help:"Whole event stores: copy one into another (embedded, PostgreSQL, KurrentDB)."`
	Provider    providerCmd    `cmd:"" help:"Payment providers' signed callbacks: send one as a provider would, to try it locally."`
	Nats        natsCmd        `cmd:"" help:"Commands through NATS JetStream: publish one as a service behind the broker would, to try it locally."`
}

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c cli
	exited := false // --help and the like: kong has printed what was asked, nothing to run
	parser, err := newParser(&c, getenv, stdout, stderr, func(int) { exited = true })
	if err != nil {
		return err
	}
	kctx, err := parser.Parse(args)
	if exited {
		return nil
	}
	if err != nil {
		return keyInArguments(err)
	}
	kctx.BindTo(ctx, (*context.Context)(nil))
	return kctx.Run(&env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv})
}

// newParser is the command line's parser into c; tests parse with it without running.
func newParser(c *cli, getenv func(string) string, stdout, stderr io.Writer, exit func(int)) (*kong.Kong, error) {
	return kong.New(c,
		kong.Name("api"),
		kong.Description("An event-sourced order service that never performs a command twice."),
		kong.Writers(stdout, stderr),
		kong.Exit(exit),
		kong.Resolvers(envResolver(getenv)),
		kong.Vars{"version": version(), "projections": projectionNames()},
		kong.ExplicitGroups([]kong.Group{pointGroup}),
	)
}

// env is what subcommands get from run.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// envResolver reads a flag's value from the environment variable named in its env tag,
// through getenv rather than the process environment, so tests can set it.
func envResolver(getenv func(string) string) kong.Resolver {
	return kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
		for _, name := range flag.Envs {
			if v := getenv(name); v != "" {
				return v, nil
			}
		}
		return nil, nil
	})
}
