package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SPEC O10, upstream A3-02..A3-04: module images as upstream lays them out
// run unchanged. Under the image root (/captf):
//
//   - module/ is the module directory (when --chdir is not given);
//   - runtime is the Terraform or OpenTofu binary, or a directory holding
//     one named tofu or terraform (when --terraform is not given);
//   - providers/ is a provider mirror: Terraform is given a CLI
//     configuration that installs providers from it first.
//
// An image without them runs as before: its working directory and the
// binary on PATH.

// DefaultImageRoot is where upstream's images keep their layout.
const DefaultImageRoot = "/captf"

// CLIConfigFile is the CLI configuration the runner writes for a provider
// mirror, in --home (or the working copy).
const CLIConfigFile = "captf-providers.tfrc"

// layout is what an image has of upstream's layout: each path "" when
// absent.
type layout struct {
	module, runtime, providers string
}

func (l layout) found() bool { return l.module != "" || l.runtime != "" || l.providers != "" }

func (l layout) String() string {
	var parts []string
	for _, p := range []struct{ name, path string }{{"module", l.module}, {"runtime", l.runtime}, {"provider mirror", l.providers}} {
		if p.path != "" {
			parts = append(parts, p.name+" "+p.path)
		}
	}
	return strings.Join(parts, ", ")
}

// detectLayout looks for upstream's layout under root.
func detectLayout(root string) layout {
	var l layout
	if root == "" {
		return l
	}
	isDir := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.IsDir()
	}
	if p := filepath.Join(root, "module"); isDir(p) {
		l.module = p
	}
	if p := filepath.Join(root, "providers"); isDir(p) {
		l.providers = p
	}
	rt := filepath.Join(root, "runtime")
	switch {
	case isDir(rt):
		for _, name := range []string{"tofu", "terraform"} {
			if p := filepath.Join(rt, name); executable(p) == nil {
				l.runtime = p
				break
			}
		}
	case executable(rt) == nil:
		l.runtime = rt
	}
	return l
}

// providerMirrorConfig is a CLI configuration that installs every provider
// from the mirror at dir when it has it, else from its registry.
func providerMirrorConfig(dir string) []byte {
	return fmt.Appendf(nil, `# Written by captf runner (SPEC O10): the image's provider mirror first.
provider_installation {
  filesystem_mirror {
    path    = %s
    include = ["*/*/*"]
  }
  direct {}
}
`, strconv.Quote(dir))
}
