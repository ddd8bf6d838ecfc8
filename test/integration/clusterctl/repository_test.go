package clusterctl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/captf/captf/test/integration/framework"
)

// The names hack/clusterctl-repository.sh writes.
const (
	providerLabel  = "infrastructure-terraform"
	releaseVersion = "v0.1.0"
	labelProvider  = "cluster.x-k8s.io/provider"
)

// repo is the local repository, written once per package.
var repo struct {
	once sync.Once
	dir  string
	err  error
}

// repository writes the local clusterctl repository with the script make
// clusterctl-repository runs, once for the package, and returns its
// directory (clusterctl.yaml names every file in it).
func repository(t *testing.T) string {
	t.Helper()
	e := framework.Get(t)
	repo.once.Do(func() {
		dir, err := os.MkdirTemp(e.CP.Dir, "clusterctl-repository-")
		if err != nil {
			repo.err = err
			return
		}
		start := time.Now()
		cmd := exec.Command(filepath.Join(e.Root, "hack", "clusterctl-repository.sh"), "--repository", dir)
		cmd.Env = append(os.Environ(), "RELEASE_VERSION="+releaseVersion)
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

// providerFile is a file of captf's release in the repository.
func providerFile(t *testing.T, name string) string {
	return filepath.Join(repository(t), providerLabel, releaseVersion, name)
}

// clusterctl runs bin/clusterctl with the repository's configuration, in a
// HOME of its own (clusterctl keeps state under it), and returns its
// standard output; it fails the test on an error, with both outputs.
func clusterctl(ctx context.Context, t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	out, stderr, err := runClusterctl(ctx, t, env, args...)
	if err != nil {
		t.Fatalf("clusterctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func runClusterctl(ctx context.Context, t *testing.T, env []string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	return runClusterctlConfig(ctx, t, filepath.Join(repository(t), "clusterctl.yaml"), env, args...)
}

// runClusterctlConfig runs bin/clusterctl with the configuration file
// config.
func runClusterctlConfig(ctx context.Context, t *testing.T, config string, env []string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	e := framework.Get(t)
	home := t.TempDir()
	args = append(args, "--config", config)
	cmd := exec.CommandContext(ctx, filepath.Join(e.Root, "bin", "clusterctl"), args...)
	cmd.Env = append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "PATH=" + os.Getenv("PATH")}, env...)
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	start := time.Now()
	err = cmd.Run()
	t.Logf("clusterctl %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return o.Bytes(), se.Bytes(), err
}

// objects splits multi-document YAML into objects, skipping empty ones.
func objects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err == io.EOF {
			return objs
		} else if err != nil {
			t.Fatalf("decoding YAML: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// readObjects reads a YAML file's objects.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return objects(t, b)
}

func key(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}
