// Package clusterctltest runs Cluster API's clusterctl (bin/clusterctl,
// hack/build-capi.sh) with the local repository hack/clusterctl-repository.sh
// writes, and starts management clusters for `clusterctl move`: what
// test/integration/clusterctl (no node: the test plays the Jobs) and
// test/e2e (a node: the Jobs run) share (SPEC K10, K11, K12).
package clusterctltest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The names hack/clusterctl-repository.sh writes.
const (
	ProviderLabel  = "infrastructure-terraform"
	ReleaseVersion = "v0.1.0"
	LabelProvider  = "cluster.x-k8s.io/provider"
)

// repo is the local repository, written once per test binary.
var repo struct {
	once sync.Once
	dir  string
	err  error
}

// Repository writes the local clusterctl repository into a new directory
// under parent with the script make clusterctl-repository runs, once for
// the test binary, and returns its directory (clusterctl.yaml names every
// file in it). root is the repository root.
func Repository(t testing.TB, root, parent string) string {
	t.Helper()
	repo.once.Do(func() {
		dir, err := os.MkdirTemp(parent, "clusterctl-repository-")
		if err != nil {
			repo.err = err
			return
		}
		start := time.Now()
		cmd := exec.Command(filepath.Join(root, "hack", "clusterctl-repository.sh"), "--repository", dir)
		cmd.Env = append(os.Environ(), "RELEASE_VERSION="+ReleaseVersion)
		out, err := cmd.CombinedOutput()
		if err != nil {
			repo.err = fmt.Errorf("hack/clusterctl-repository.sh: %v\n%s", err, out)
			return
		}
		t.Logf("local clusterctl repository written in %s:\n%s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
		repo.dir = dir
	})
	if repo.err != nil {
		t.Fatal(repo.err)
	}
	return repo.dir
}

// Run runs root's bin/clusterctl with the configuration file config, in a
// HOME of its own (clusterctl keeps state under it), with env added to a
// minimal environment.
func Run(ctx context.Context, t testing.TB, root, config string, env []string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	home := t.TempDir()
	args = append(args, "--config", config)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "clusterctl"), args...)
	cmd.Env = append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "PATH=" + os.Getenv("PATH")}, env...)
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	start := time.Now()
	err = cmd.Run()
	t.Logf("clusterctl %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return o.Bytes(), se.Bytes(), err
}

// BuildCaptf builds root's cmd/captf into a temporary directory, for
// managers run as host processes.
func BuildCaptf(ctx context.Context, t testing.TB, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "captf")
	start := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/captf")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building captf: %v\n%s", err, out)
	}
	t.Logf("captf built in %s", time.Since(start).Round(time.Millisecond))
	return bin
}

// ImageConfig writes, into a temporary directory, the configuration file
// base (the repository's clusterctl.yaml) with clusterctl's image override
// for captf's container (docs/deploy.md, "With clusterctl"): repository
// and tag replace the release image's. It returns the file's path.
func ImageConfig(t testing.TB, base, repository, tag string) string {
	t.Helper()
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "clusterctl.yaml")
	override := fmt.Sprintf("images:\n  %s:\n    repository: %s\n    tag: %s\n", ProviderLabel, repository, tag)
	if err := os.WriteFile(config, append(b, override...), 0o600); err != nil {
		t.Fatal(err)
	}
	return config
}
