// Command probe GETs a URL and prints the body; it exits non-zero unless the
// status is 200. hack/local-up.sh uses it so a fresh machine needs no curl.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: probe <url>")
		os.Exit(2)
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Println(strings.TrimSpace(string(b)))
	if resp.StatusCode != http.StatusOK {
		os.Exit(1)
	}
}
