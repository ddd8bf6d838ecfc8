package admission

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// TestRequiredKeysNeedSecretAccess covers B9 as user alice, who may edit
// identities but not read the Secret: a change of spec.requiredKeys would let
// her probe the Secret's key names through CredentialsIncomplete, so it needs
// the A2 review; narrowing and label edits still need nothing (A3).
func TestRequiredKeysNeedSecretAccess(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "creds", nil)
	ref := f.secret(ns, "probed")
	name := framework.Name("id")
	// The administrator (system:masters) creates the identity.
	id := newIdentity(name, ref, &v1.AllowedNamespaces{List: []string{"team-a", "team-b"}})
	id.Spec.RequiredKeys = []string{"TOKEN"}
	if _, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(f.ctx, id, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(f.ctx, name, metav1.DeleteOptions{})
	})

	f.grantIdentities(controlplane.Alice)
	ids := f.e.CaptfAs(t, controlplane.Alice).InfrastructureV1alpha1().TerraformClusterIdentities()
	update := func(edit func(*v1.TerraformClusterIdentity)) error { return updateIdentity(f.ctx, ids, name, edit) }

	// B9: adding, removing or clearing required keys is refused, naming the
	// user, the Secret and the field.
	for what, keys := range map[string][]string{
		"adding a key":   {"TOKEN", "AWS_SECRET_ACCESS_KEY"},
		"replacing keys": {"AWS_SECRET_ACCESS_KEY"},
		"clearing keys":  nil,
	} {
		t.Run(what, func(t *testing.T) {
			err := update(func(i *v1.TerraformClusterIdentity) { i.Spec.RequiredKeys = keys })
			requireRefused(t, err, `"alice"`, ns+"/probed", "spec.requiredKeys")
		})
	}

	// A3 still holds: narrowing and a label edit need no review, and neither
	// does an update that leaves requiredKeys as they are.
	if err := update(func(i *v1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces.List = []string{"team-a"} }); err != nil {
		t.Fatalf("A3: narrowing without get must be allowed: %v", err)
	}
	if err := update(func(i *v1.TerraformClusterIdentity) { i.Labels = map[string]string{"owner": "alice"} }); err != nil {
		t.Fatalf("A3: a label edit without get must be allowed: %v", err)
	}

	// With get on the Secret the same change goes through.
	f.grantSecret(controlplane.Alice, ref)
	framework.Eventually(t, 30*time.Second, func() (bool, string) {
		err := update(func(i *v1.TerraformClusterIdentity) { i.Spec.RequiredKeys = []string{"TOKEN", "AWS_SECRET_ACCESS_KEY"} })
		return err == nil, fmt.Sprint(err)
	})
}
