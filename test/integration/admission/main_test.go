// Package admission tests the identity webhook through the real API server
// and its RBAC authorizer, calling as real users by impersonation: A2-A5,
// X3 (TLS), and fail-closed behaviour with the manager stopped. The API
// server presents a client certificate to the webhook and every manager
// here requires it (--webhook-client-ca, SPEC B14), so each test also
// proves the API server's calls pass; B13's bound on an identity DELETE
// with 10,000 users is measured here.
package admission

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{BuildCaptf: true, ManagerRBAC: true, WebhookClientCert: true})
}
