// Command fakecloud-client talks to the fake cloud (package fakecloud) from a
// Terraform module's local-exec provisioners, so a module needs no provider
// and no shell (issue 12). It is static and has no dependencies.
//
//	fakecloud-client create --id ID --name NAME [flags]   PUT /resources/ID, prints the resource as JSON
//	fakecloud-client create --name NAME [flags]           POST /resources, prints the resource (with its new id)
//	    [--bootstrap-data-env NAME] [--bootstrap-format F] the create carries the bootstrap data held by
//	                                                     the environment variable NAME, if set (SPEC K5)
//	fakecloud-client get --id ID [flags]                  GET /resources/ID
//	fakecloud-client delete --id ID [--missing-ok] [flags]
//	fakecloud-client whoami [flags]                       which credential generation the server sees
//	fakecloud-client wait-rotation [--wait 5m] [flags]    see below
//
// Flags every subcommand takes (after the subcommand):
//
//	--endpoint URL            the fake cloud (default $FAKECLOUD_ENDPOINT)
//	--credential-source S     "env" or "file" (default env)
//	--credential-env NAME     the variable for "env" (default FAKECLOUD_TOKEN)
//	--credential-file PATH    the file for "file" (default /var/run/captf/credentials/FAKECLOUD_TOKEN,
//	                          where a captf Job mounts the key FAKECLOUD_TOKEN, SPEC J2)
//
// The client sends the credential as a bearer token and the source's name in
// X-Credential-Source, so the fake cloud's /seen tells which delivery path a
// Job used. It never prints a credential, not even in an error.
//
// wait-rotation proves SPEC R3 from inside a running Job: it waits until the
// file's credential differs from the environment's (the identity's Secret
// was rotated while the Job ran) and the fake cloud accepts the file's, then
// asks the fake cloud once with each (whoami) and prints both answers. It
// succeeds when the file's credential is accepted; what the environment's
// got is for the test to read from /seen.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults for where the credential comes from.
const (
	DefaultCredentialEnv  = "FAKECLOUD_TOKEN"
	DefaultCredentialFile = "/var/run/captf/credentials/FAKECLOUD_TOKEN"
	sourceHeader          = "X-Credential-Source"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// options are the flags of every subcommand.
type options struct {
	endpoint  string
	source    string
	envName   string
	file      string
	id        string
	name      string
	missingOK bool
	// bootstrapEnv names the variable holding the create's bootstrap data.
	bootstrapEnv    string
	bootstrapFormat string
	wait            time.Duration
	interval        time.Duration
	timeout         time.Duration
}

// client is one configured fake cloud client.
type client struct {
	opts   options
	getenv func(string) string
	http   *http.Client
	stderr io.Writer
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "fakecloud-client: want a subcommand: create, get, delete, whoami, wait-rotation")
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet("fakecloud-client "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.endpoint, "endpoint", getenv("FAKECLOUD_ENDPOINT"), "fake cloud URL (default $FAKECLOUD_ENDPOINT)")
	fs.StringVar(&o.source, "credential-source", "env", `where the credential comes from: "env" or "file"`)
	fs.StringVar(&o.envName, "credential-env", DefaultCredentialEnv, "environment variable holding the credential")
	fs.StringVar(&o.file, "credential-file", DefaultCredentialFile, "file holding the credential")
	fs.StringVar(&o.id, "id", "", "resource id")
	fs.StringVar(&o.name, "name", "", "resource name (create)")
	fs.StringVar(&o.bootstrapEnv, "bootstrap-data-env", "", "create: environment variable holding bootstrap data to send (none when unset or empty)")
	fs.StringVar(&o.bootstrapFormat, "bootstrap-format", "", "create: the bootstrap data's format, sent with it")
	fs.BoolVar(&o.missingOK, "missing-ok", false, "delete: a resource that does not exist is not an error")
	fs.DurationVar(&o.wait, "wait", 5*time.Minute, "wait-rotation: how long to wait for the rotation")
	fs.DurationVar(&o.interval, "interval", time.Second, "wait-rotation: how often to look")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of each request")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "fakecloud-client %s: unexpected arguments %q\n", cmd, fs.Args())
		return 2
	}
	if o.endpoint == "" {
		fmt.Fprintf(stderr, "fakecloud-client %s: no endpoint: set --endpoint or FAKECLOUD_ENDPOINT\n", cmd)
		return 2
	}
	if o.source != "env" && o.source != "file" {
		fmt.Fprintf(stderr, "fakecloud-client %s: --credential-source must be env or file, not %q\n", cmd, o.source)
		return 2
	}
	c := &client{opts: o, getenv: getenv, http: &http.Client{Timeout: o.timeout}, stderr: stderr}

	var err error
	switch cmd {
	case "create":
		err = c.create(ctx, stdout)
	case "get":
		err = c.get(ctx, stdout)
	case "delete":
		err = c.delete(ctx)
	case "whoami":
		var body []byte
		_, body, err = c.do(ctx, http.MethodGet, "/whoami", nil, o.source, 200)
		if err == nil {
			_, _ = stdout.Write(body)
		}
	case "wait-rotation":
		err = c.waitRotation(ctx, stdout)
	default:
		err = fmt.Errorf("unknown subcommand %q: want create, get, delete, whoami or wait-rotation", cmd)
	}
	if err != nil {
		fmt.Fprintf(stderr, "fakecloud-client %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func (c *client) create(ctx context.Context, stdout io.Writer) error {
	if c.opts.name == "" {
		return errors.New("--name is required")
	}
	req := map[string]string{"name": c.opts.name}
	if c.opts.bootstrapEnv != "" {
		if data := c.getenv(c.opts.bootstrapEnv); data != "" {
			req["bootstrapData"] = data
			req["bootstrapFormat"] = c.opts.bootstrapFormat
		}
	}
	body, _ := json.Marshal(req)
	method, path := http.MethodPost, "/resources"
	if c.opts.id != "" {
		method, path = http.MethodPut, "/resources/"+url.PathEscape(c.opts.id)
	}
	_, resp, err := c.do(ctx, method, path, body, c.opts.source, 200, 201)
	if err != nil {
		return err
	}
	_, err = stdout.Write(resp)
	return err
}

func (c *client) get(ctx context.Context, stdout io.Writer) error {
	if c.opts.id == "" {
		return errors.New("--id is required")
	}
	_, resp, err := c.do(ctx, http.MethodGet, "/resources/"+url.PathEscape(c.opts.id), nil, c.opts.source, 200)
	if err != nil {
		return err
	}
	_, err = stdout.Write(resp)
	return err
}

func (c *client) delete(ctx context.Context) error {
	if c.opts.id == "" {
		return errors.New("--id is required")
	}
	ok := []int{204}
	if c.opts.missingOK {
		ok = append(ok, 404)
	}
	_, _, err := c.do(ctx, http.MethodDelete, "/resources/"+url.PathEscape(c.opts.id), nil, c.opts.source, ok...)
	return err
}

// waitRotation: see the package comment.
func (c *client) waitRotation(ctx context.Context, stdout io.Writer) error {
	envValue, err := c.credential("env")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(c.opts.wait)
	fmt.Fprintf(c.stderr, "fakecloud-client: waiting up to %s for %s to differ from $%s\n", c.opts.wait, c.opts.file, c.opts.envName)
	for {
		fileValue, err := c.credential("file")
		if err == nil && fileValue != envValue {
			status, _, err := c.do(ctx, http.MethodGet, "/whoami", nil, "file")
			if err == nil && status == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no rotation accepted by the fake cloud within %s", c.opts.wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.opts.interval):
		}
	}
	envStatus, _, err := c.do(ctx, http.MethodGet, "/whoami", nil, "env")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "{\"rotated\":true,\"file\":%d,\"env\":%d}\n", http.StatusOK, envStatus)
	return err
}

// credential reads the credential from source ("env" or "file"), trimmed.
func (c *client) credential(source string) (string, error) {
	var v string
	switch source {
	case "env":
		v = c.getenv(c.opts.envName)
		if strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("environment variable %s is empty or unset", c.opts.envName)
		}
	case "file":
		b, err := os.ReadFile(c.opts.file)
		if err != nil {
			return "", fmt.Errorf("reading the credential file: %w", err)
		}
		v = string(b)
		if strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("credential file %s is empty", c.opts.file)
		}
	}
	return strings.TrimSpace(v), nil
}

// do sends one request with the credential from source. With ok statuses
// given, any other status is an error; without, every answer is returned.
// It logs the method, path, source and status to stderr, never the
// credential.
func (c *client) do(ctx context.Context, method, path string, body []byte, source string, ok ...int) (int, []byte, error) {
	cred, err := c.credential(source)
	if err != nil {
		return 0, nil, err
	}
	u := strings.TrimSuffix(c.opts.endpoint, "/") + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set(sourceHeader, source)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// A *url.Error names the URL, never the headers.
		return 0, nil, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	fmt.Fprintf(c.stderr, "fakecloud-client: %s %s with the credential from %s: %s\n", method, path, source, resp.Status)
	if len(ok) == 0 {
		return resp.StatusCode, respBody, nil
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp.StatusCode, respBody, nil
		}
	}
	return resp.StatusCode, respBody, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(respBody)))
}
