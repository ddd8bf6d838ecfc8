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

// maxMirrorProviders bounds how many providers of a mirror the CLI
// configuration names.
const maxMirrorProviders = 500

// mirrorProviders lists the providers the mirror at dir holds, as
// "hostname/namespace/type": its directories three levels deep, which both
// of OpenTofu's and Terraform's filesystem_mirror layouts have (unpacked:
// .../type/version/os_arch/, packed: .../type/*.zip). Sorted; at most
// maxMirrorProviders.
func mirrorProviders(dir string) []string {
	var out []string
	for _, host := range subdirs(dir) {
		for _, ns := range subdirs(filepath.Join(dir, host)) {
			for _, typ := range subdirs(filepath.Join(dir, host, ns)) {
				if len(out) == maxMirrorProviders {
					return out
				}
				out = append(out, host+"/"+ns+"/"+typ)
			}
		}
	}
	return out
}

// subdirs lists the directories in dir, sorted, without hidden ones.
func subdirs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// providerMirrorConfig is a CLI configuration that installs the providers
// the mirror at dir holds from it, and every other provider from its
// registry. The mirror's providers are excluded from direct installation:
// otherwise init asks their registry as well for the versions it has, which
// fails without a network (a pod, an air-gapped cluster) or for a host no
// registry serves, even though the mirror has the provider (seen with
// OpenTofu and Terraform: "no such host", issue 24). A mirror without a
// provider gives the mirror for everything and direct {} as before.
func providerMirrorConfig(dir string, providers []string) []byte {
	if len(providers) == 0 {
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
	quoted := make([]string, len(providers))
	for i, p := range providers {
		quoted[i] = strconv.Quote(p)
	}
	list := "[" + strings.Join(quoted, ", ") + "]"
	return fmt.Appendf(nil, `# Written by captf runner (SPEC O10): the providers of the image's mirror
# from it only, the others from their registry.
provider_installation {
  filesystem_mirror {
    path    = %s
    include = %s
  }
  direct {
    exclude = %s
  }
}
`, strconv.Quote(dir), list, list)
}
