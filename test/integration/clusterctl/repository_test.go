package clusterctl

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/captf/captf/test/clusterctltest"
	"github.com/captf/captf/test/integration/framework"
)

// The names hack/clusterctl-repository.sh writes.
const (
	providerLabel  = clusterctltest.ProviderLabel
	releaseVersion = clusterctltest.ReleaseVersion
	labelProvider  = clusterctltest.LabelProvider
)

// repository writes the local clusterctl repository once for the package
// (in its control plane's directory) and returns its directory.
func repository(t *testing.T) string {
	t.Helper()
	e := framework.Get(t)
	return clusterctltest.Repository(t, e.Root, e.CP.Dir)
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
	return clusterctltest.Run(ctx, t, framework.Get(t).Root, config, env, args...)
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
