// Command testserver runs the KurrentDB test server of package kurrenttest as a process, so that
// several API processes can share it in end-to-end tests. It prints "listening on <url>" with
// the esdb:// connection string once it serves, and stops on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/orders/eventstore/kurrent/kurrenttest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:2113", "address to listen on (port 0 picks a free one)")
	data := flag.String("data", "./kurrenttest-data", "data directory")
	flag.Parse()
	srv, err := kurrenttest.Start(*addr, *data, kurrenttest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", srv.URL())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
}
