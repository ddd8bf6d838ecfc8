// Package api tests the CRDs on a real kube-apiserver: the OpenAPI and CEL
// validation of SPEC A1, A6, A7, A8 and A9, defaults, and the CRD metadata
// of SPEC section 1.
package api

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{})
}
