// Package version holds the build's version and commit, set with -ldflags
// -X by the Makefile.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time: -X github.com/captf/captf/pkg/version.Version=...
var (
	// Version is the release version, "dev" for an unreleased build.
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = ""
)

// Info returns one line: version, commit and Go version.
func Info() string {
	return fmt.Sprintf("captf %s (commit %s, %s %s/%s)", Version, commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// UserAgent is the manager's user agent towards the API server.
func UserAgent() string {
	return fmt.Sprintf("captf-manager/%s (%s/%s)", Version, runtime.GOOS, runtime.GOARCH)
}

// commit falls back to the VCS stamp the go command embeds.
func commit() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
