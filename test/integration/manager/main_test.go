// Package manager tests `captf manager` as a process against a real
// kube-apiserver: probes, metrics (over HTTPS with a token, SPEC B4), leader
// election and graceful shutdown (SPEC section 12).
package manager

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{BuildCaptf: true, ManagerRBAC: true})
}
