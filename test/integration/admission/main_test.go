// Package admission tests the identity webhook through the real API server
// and its RBAC authorizer, calling as real users by impersonation: A2-A5,
// X3 (TLS), and fail-closed behaviour with the manager stopped.
package admission

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{BuildCaptf: true, ManagerRBAC: true})
}
