// Package mirrorrace proves SPEC P3 and B1 on the real API server: a mirror
// changed between the manager's decision and its write keeps that change.
// The manager (`captf manager` as a subprocess, as its ServiceAccount user
// with manifests/rbac applied) talks to kube-apiserver through a proxy
// (faultkit.FlakyProxy, healthy) whose hook holds the manager's first
// write of the mirror, changes the Secret as the admin meanwhile (another
// owner reference, an annotation a tenant may set, or the label that makes
// it a mirror removed), then lets the write through. The race is therefore
// exact, not a matter of timing: the API server must refuse the write
// (409: it is preconditioned on the version the manager planned from), the
// manager must re-read the mirror and plan again, and the other writer's
// change must survive.
package mirrorrace

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{BuildCaptf: true, ManagerRBAC: true})
}
