package tofu

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/runner"
)

// TestImageLayoutO10 runs a module image laid out as upstream's (SPEC O10,
// A3-02..A3-04) with the real binaries: the runner finds the module in
// <root>/module and the binary at <root>/runtime without --chdir or
// --terraform, and hands Terraform a CLI configuration for the provider
// mirror <root>/providers, which both binaries accept.
func TestImageLayoutO10(t *testing.T) {
	for _, b := range []struct{ name, binary, missing string }{
		{"tofu", tofuBinary, "bin/tofu is missing: build it with `make tofu`"},
		{"terraform", terraformBinary, "bin/terraform is missing: build it with `make terraform`"},
	} {
		t.Run(b.name, func(t *testing.T) {
			if b.binary == "" {
				t.Skip(b.missing)
			}
			img := t.TempDir()
			require.NoError(t, os.CopyFS(filepath.Join(img, "module"), os.DirFS(filepath.Join(root, "test", "tofu", "testdata", "contract-none"))))
			require.NoError(t, os.Symlink(b.binary, filepath.Join(img, "runtime")))
			require.NoError(t, os.MkdirAll(filepath.Join(img, "providers"), 0o755))

			vars, err := json.Marshal(map[string]any{"greeting": "hello from the image layout"})
			require.NoError(t, err)
			env := append(tofuEnv(t, t.TempDir(), ""), runner.VariablesEnv+"="+string(vars))
			// No terraform or tofu on PATH: only <root>/runtime can run.
			env[0] = "PATH=/usr/bin:/bin"
			var out bytes.Buffer
			code := runner.Main(context.Background(), []string{"apply", "--image-root=" + img,
				"--workdir=" + t.TempDir(), "--home=" + filepath.Join(t.TempDir(), "home")}, env, &out, &out)
			t.Logf("captf runner (exit %d):\n%s", code, out.String())
			require.Equal(t, 0, code)
			assert.Contains(t, out.String(), "image layout under "+img+" (SPEC O10): module "+filepath.Join(img, "module")+", runtime "+filepath.Join(img, "runtime")+", provider mirror "+filepath.Join(img, "providers"))
			assert.Contains(t, out.String(), "providers from the image's mirror")
			assert.Equal(t, "captf runner: init succeeded, apply succeeded", lastLine(out.String()))
		})
	}
}
