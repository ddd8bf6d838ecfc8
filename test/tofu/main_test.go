// Package tofu runs OpenTofu (bin/tofu, built by `make tofu` from the Go
// module proxy) on the test module test/e2e/module against the fake cloud
// (test/fakecloud), out of cluster: with local state, and with OpenTofu's
// built-in kubernetes backend against a real kube-apiserver, the way captf's
// runner will configure it (SPEC T2, T3). Issue 11 asks for this proof of the
// runner's environment before a real node exists; issue 12's end-to-end test
// runs the same module in a pod.
//
// The contract inputs test (SPEC K6) runs HashiCorp Terraform too
// (bin/terraform, built by `make terraform`), with the modules of testdata/.
//
// Without bin/tofu and bin/terraform every test skips and no control plane
// starts; without one of them, its tests skip.
package tofu

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

// root is the repository root, tofuBinary bin/tofu and terraformBinary
// bin/terraform ("" when missing).
var (
	root            string
	tofuBinary      string
	terraformBinary string
)

func TestMain(m *testing.M) {
	var err error
	if root, err = framework.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if p := filepath.Join(root, "bin", "tofu"); isExecutable(p) {
		tofuBinary = p
	}
	if p := filepath.Join(root, "bin", "terraform"); isExecutable(p) {
		terraformBinary = p
	}
	if tofuBinary == "" && terraformBinary == "" {
		// Every test skips with the reason; no control plane is needed.
		os.Exit(m.Run())
	}
	framework.Main(m, framework.Options{})
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func requireTofu(t *testing.T) {
	t.Helper()
	if tofuBinary == "" {
		t.Skip("bin/tofu is missing: build it with `make tofu` (hack/build-tofu.sh, a few minutes the first time)")
	}
}
