package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// imageRoot builds an image root with upstream's layout (SPEC O10): a
// module directory, the fake as the runtime (a file, or a directory with
// it named tofu), and optionally a provider mirror.
func imageRoot(t *testing.T, runtimeDir, providers bool) (root, module string) {
	t.Helper()
	root = t.TempDir()
	module = filepath.Join(root, "module")
	require.NoError(t, os.MkdirAll(module, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(module, "main.tf"), nil, 0o644))
	runtime := filepath.Join(root, "runtime")
	if runtimeDir {
		require.NoError(t, os.MkdirAll(runtime, 0o755))
		runtime = filepath.Join(runtime, "tofu")
	}
	require.NoError(t, os.WriteFile(runtime, []byte(fakeTerraform), 0o755))
	if providers {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "providers", "registry.example.com"), 0o755))
	}
	return root, module
}

// SPEC O10: an image laid out as upstream's runs its module in
// /captf/module with the binary /captf/runtime (a file, or a directory
// holding tofu or terraform), and installs providers from /captf/providers
// first; the runner's flags win over the layout.
func TestImageLayoutO10(t *testing.T) {
	for _, tt := range []struct {
		name       string
		runtimeDir bool
		providers  bool
		extra      []string
	}{
		{"runtime file", false, false, nil},
		{"runtime directory and provider mirror", true, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "PATH=/usr/bin:/bin") // no terraform on PATH: only the runtime can run
			f.environ = f.environ[1:]                // newFixture's own PATH goes
			root, module := imageRoot(t, tt.runtimeDir, tt.providers)
			home := t.TempDir()
			code, _, stderr := f.run(append([]string{"apply", "--image-root=" + root, "--home=" + home}, tt.extra...)...)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, physical(t, module), strings.TrimSpace(f.read("apply.pwd")), "the module directory is /captf/module")
			require.Contains(t, stderr, "image layout under "+root)
			env := f.read("init.env")
			cfgFile := filepath.Join(home, CLIConfigFile)
			if tt.providers {
				require.Contains(t, env, "\nTF_CLI_CONFIG_FILE="+cfgFile+"\n")
				b, err := os.ReadFile(cfgFile)
				require.NoError(t, err)
				require.Contains(t, string(b), `path    = "`+filepath.Join(root, "providers")+`"`)
			} else {
				require.NotContains(t, env, "TF_CLI_CONFIG_FILE=")
				require.NoFileExists(t, cfgFile)
			}
		})
	}
}

// Flags given win over the layout; a TF_CLI_CONFIG_FILE from the Job's
// environment is dropped (envfilter) and the runner's used; an image
// without the layout runs as before.
func TestImageLayoutFlagsWinO10(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "TF_CLI_CONFIG_FILE=/etc/own.tfrc")
	root, _ := imageRoot(t, false, true)
	home := t.TempDir()
	code, _, stderr := f.run("apply", "--image-root="+root, "--home="+home, "--chdir="+f.module, "--terraform=terraform")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, physical(t, f.module), strings.TrimSpace(f.read("apply.pwd")))
	require.NotContains(t, f.read("init.env"), "/etc/own.tfrc")
	require.Contains(t, f.read("init.env"), "\nTF_CLI_CONFIG_FILE="+filepath.Join(home, CLIConfigFile)+"\n")

	g := newFixture(t)
	code, _, stderr = g.run("apply", "--image-root="+t.TempDir(), "--chdir="+g.module)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "image layout")
}

// SPEC O10 (issue 24): the providers a mirror holds are installed from it
// only, never looked up in their registry too (init fails without a
// network otherwise); every other provider still comes from its registry.
// Both mirror layouts count: unpacked (type/version/os_arch/) and packed
// (type/*.zip).
func TestProviderMirrorConfigExcludesMirroredFromDirect(t *testing.T) {
	for _, tt := range []struct {
		name  string
		dirs  []string
		files []string
		want  []string
	}{
		{"empty mirror", nil, nil, nil},
		{"a host without providers", []string{"registry.example.com"}, nil, nil},
		{"unpacked", []string{"captf.local/captf/fakecloud/0.1.0/linux_amd64"}, nil, []string{"captf.local/captf/fakecloud"}},
		{"packed and unpacked, sorted, hidden and plain files skipped",
			[]string{"registry.opentofu.org/hashicorp/random", "captf.local/captf/fakecloud/0.1.0/linux_amd64", "captf.local/.cache/x"},
			[]string{"registry.opentofu.org/hashicorp/random/terraform-provider-random_3.6.0_linux_amd64.zip", "captf.local/captf/README"},
			[]string{"captf.local/captf/fakecloud", "registry.opentofu.org/hashicorp/random"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range tt.dirs {
				require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
			}
			for _, f := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
			}
			got := mirrorProviders(dir)
			require.Equal(t, tt.want, got)
			cfg := string(providerMirrorConfig(dir, got))
			require.Contains(t, cfg, `path    = "`+dir+`"`)
			if len(tt.want) == 0 {
				require.Contains(t, cfg, `include = ["*/*/*"]`)
				require.Contains(t, cfg, "direct {}")
				return
			}
			list := `["` + strings.Join(tt.want, `", "`) + `"]`
			require.Contains(t, cfg, "include = "+list)
			require.Contains(t, cfg, "direct {\n    exclude = "+list+"\n  }")
		})
	}
}
