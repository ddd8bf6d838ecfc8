// Command terraform-provider-fakecloud is a Terraform/OpenTofu provider for
// the fake cloud of the tests (test/fakecloud). Its one resource,
// fakecloud_resource, is created, read, updated and deleted through the fake
// cloud's HTTP API, so a refresh sees what changed in the cloud behind the
// module's back: what the drift end-to-end test needs (SPEC O7, issue 24).
//
// The credential comes as the e2e module takes it today (SPEC J2): the
// environment variable FAKECLOUD_TOKEN when set, else the provider's
// credential_file (default /var/run/captf/credentials/FAKECLOUD_TOKEN, where
// a captf Job mounts the key), re-read on every request so a rotated mount
// is followed (R3). The credential is never logged, and never in the state
// or a diagnostic (X1).
//
// hack/build-fakecloud-provider.sh builds it into a provider mirror; the
// module test/e2e/module-drift uses it as captf.local/captf/fakecloud.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
)

// Address is the provider's source address: a host no registry serves, so
// it can only come from a mirror (SPEC O10).
const Address = "captf.local/captf/fakecloud"

// version is set by the build (-X main.version=...).
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers (prints TF_REATTACH_PROVIDERS)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), newProvider(version), providerserver.ServeOpts{Address: Address, Debug: *debug})
	if err != nil {
		log.Fatal(err)
	}
}
