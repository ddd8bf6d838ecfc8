package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// DefaultCredentialFile is where a captf Job mounts the key FAKECLOUD_TOKEN
// (SPEC J2).
const DefaultCredentialFile = "/var/run/captf/credentials/FAKECLOUD_TOKEN"

// tokenEnv is the environment variable a captf Job's envFrom sets (J2).
const tokenEnv = "FAKECLOUD_TOKEN"

// errNotFound is the fake cloud's 404 for a resource.
var errNotFound = errors.New("no such resource")

// client calls the fake cloud's API (test/fakecloud).
type client struct {
	endpoint       string
	credentialFile string
	http           *http.Client
}

// remote is a resource as the fake cloud answers it.
type remote struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Content string `json:"content"`
}

// credential returns the credential and where it came from: the
// environment first, else the file, read now (a rotated mount is
// followed, R3).
func (c *client) credential() (token, source string, err error) {
	if v := strings.TrimSpace(os.Getenv(tokenEnv)); v != "" {
		return v, "env", nil
	}
	b, err := os.ReadFile(c.credentialFile)
	if err != nil {
		// The path only: the error never holds the file's content.
		return "", "", fmt.Errorf("no %s in the environment and the credential file %s cannot be read", tokenEnv, c.credentialFile)
	}
	return strings.TrimSpace(string(b)), "file", nil
}

// do sends one request and decodes a 2xx answer into out (when not nil).
// A 404 is errNotFound; any other failure names the method, path and
// status with the fake cloud's error text, which never holds a credential.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	token, source, err := c.credential()
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.endpoint, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Credential-Source", source)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errNotFound
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	case out != nil:
		return json.Unmarshal(data, out)
	}
	return nil
}

// create creates the resource: PUT with the id when one is given, else
// POST (the cloud picks the id). A PUT that finds the resource already
// there (an interrupted apply) sets its content.
func (c *client) create(ctx context.Context, id, name, content string) (remote, error) {
	var out remote
	body := map[string]string{"name": name, "content": content}
	if id == "" {
		err := c.do(ctx, http.MethodPost, "/resources", body, &out)
		return out, err
	}
	if err := c.do(ctx, http.MethodPut, "/resources/"+id, body, &out); err != nil {
		return out, err
	}
	if out.Content != content {
		return c.setContent(ctx, id, content)
	}
	return out, nil
}

func (c *client) get(ctx context.Context, id string) (remote, error) {
	var out remote
	err := c.do(ctx, http.MethodGet, "/resources/"+id, nil, &out)
	return out, err
}

func (c *client) setContent(ctx context.Context, id, content string) (remote, error) {
	var out remote
	err := c.do(ctx, http.MethodPatch, "/resources/"+id, map[string]string{"content": content}, &out)
	return out, err
}

// remove deletes the resource; one already gone is not an error.
func (c *client) remove(ctx context.Context, id string) error {
	if err := c.do(ctx, http.MethodDelete, "/resources/"+id, nil, nil); err != nil && !errors.Is(err, errNotFound) {
		return err
	}
	return nil
}
