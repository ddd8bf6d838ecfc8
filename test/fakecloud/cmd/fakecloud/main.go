// Command fakecloud serves the fake cloud of package fakecloud (issue 12).
//
//	fakecloud --listen :8080 --credential-file /var/run/fakecloud/FAKECLOUD_TOKEN
//	FAKECLOUD_EXPECTED_TOKEN=... fakecloud --credential-env FAKECLOUD_EXPECTED_TOKEN
//
// --credential-file is re-read on every request, so a rotation of a mounted
// Secret is seen as soon as the kubelet refreshes the file. It prints the
// address it listens on (useful with port 0), never a credential.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/captf/captf/test/fakecloud"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("fakecloud", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "address to listen on (host:port; port 0 picks a free one)")
	file := fs.String("credential-file", "", "file holding the expected credential, re-read on every request")
	env := fs.String("credential-env", "", "environment variable holding the expected credential, read once at start")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 || (*file == "") == (*env == "") {
		fmt.Fprintln(os.Stderr, "fakecloud: set exactly one of --credential-file and --credential-env")
		return 2
	}

	var source fakecloud.CredentialSource
	if *file != "" {
		source = fakecloud.FileCredential(*file)
		if _, err := source(); err != nil {
			// Not fatal: the Secret may be mounted later; requests get 503 until then.
			fmt.Fprintf(os.Stderr, "fakecloud: cannot read --credential-file yet: %v\n", err)
		}
	} else {
		v, ok := os.LookupEnv(*env)
		if !ok || v == "" {
			fmt.Fprintf(os.Stderr, "fakecloud: environment variable %s is empty or unset\n", *env)
			return 2
		}
		source = fakecloud.StaticCredential(v)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakecloud: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "fakecloud: listening on %s\n", ln.Addr())

	srv := &http.Server{Handler: fakecloud.NewServer(source), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "fakecloud: %v\n", err)
		return 1
	}
	return 0
}
