package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	typedv1alpha1 "github.com/captf/captf/pkg/generated/clientset/versioned/typed/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

type fixture struct {
	t       *testing.T
	e       *framework.Env
	ctx     context.Context
	m       *framework.Manager
	certDir string
}

// setup runs a manager with the webhook on a free port, requiring the API
// server's client certificate (B14), and installs the deployed webhook
// configuration (manifests/webhook) pointed at it.
func setup(t *testing.T) *fixture {
	e := framework.Get(t)
	ctx := framework.Context(t)
	dir, ca := framework.WebhookCert(t)
	m := e.StartManager(t, framework.ManagerOptions{User: controlplane.Manager, Webhook: true, WebhookCertDir: dir,
		Args: []string{"--sync-period=5s", "--identity-resync=2s", "--webhook-client-ca=" + e.CP.WebhookClient.CAFile}})
	e.InstallWebhook(t, m, ca)
	return &fixture{t: t, e: e, ctx: ctx, m: m, certDir: dir}
}

// grantIdentities lets user create, update and delete identities, and
// nothing about Secrets.
func (f *fixture) grantIdentities(user string) {
	f.t.Helper()
	name := framework.Name("identity-admin")
	rules := []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.SchemeGroupVersion.Group}, Resources: []string{"terraformclusteridentities"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}
	f.clusterRole(name, user, rules)
	// The API server's RBAC cache sees a new binding a moment later; wait
	// until it does, so a refusal the test asserts is the webhook's.
	framework.Eventually(f.t, 30*time.Second, func() (bool, string) {
		sar, err := f.e.Kube.AuthorizationV1().SubjectAccessReviews().Create(f.ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: v1alpha1.SchemeGroupVersion.Group, Resource: "terraformclusteridentities", Verb: "update"}}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, fmt.Sprintf("%s may update identities: %v", user, err)
	})
}

func (f *fixture) clusterRole(name, user string, rules []rbacv1.PolicyRule) {
	f.t.Helper()
	rbac := f.e.Kube.RbacV1()
	if _, err := rbac.ClusterRoles().Create(f.ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(f.ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// grantSecret lets user get exactly one Secret.
func (f *fixture) grantSecret(user string, ref v1alpha1.SecretReference) {
	f.t.Helper()
	rbac := f.e.Kube.RbacV1()
	name := framework.Name("read-" + ref.Name)
	if _, err := rbac.Roles(ref.Namespace).Create(f.ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{ref.Name}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ref.Namespace).Create(f.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) secret(ns, name string) v1alpha1.SecretReference {
	f.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"TOKEN": "not-for-alice"}}
	if _, err := f.e.Kube.CoreV1().Secrets(ns).Create(f.ctx, s, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	return v1alpha1.SecretReference{Namespace: ns, Name: name}
}

func newIdentity(name string, ref v1alpha1.SecretReference, allowed *v1alpha1.AllowedNamespaces) *v1alpha1.TerraformClusterIdentity {
	return &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: allowed}}
}

// requireRefused fails unless err is a webhook refusal containing fragments.
func requireRefused(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the webhook must refuse the request; it was allowed")
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Fatalf("want a refusal from the webhook, got %T %v", err, err)
	}
	for _, s := range fragments {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("refusal %q does not contain %q", err.Error(), s)
		}
	}
	if strings.Contains(err.Error(), "not-for-alice") {
		t.Fatalf("X1: the refusal contains the Secret's value")
	}
}

// TestSecretAccessIsChecked covers A2 and A3 as user alice, who may manage
// identities but not read Secrets.
func TestSecretAccessIsChecked(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "creds", nil)
	readable := f.secret(ns, "readable")
	unreadable := f.secret(ns, "unreadable")
	f.grantIdentities(controlplane.Alice)
	alice := f.e.CaptfAs(t, controlplane.Alice)
	ids := alice.InfrastructureV1alpha1().TerraformClusterIdentities()
	name := framework.Name("id")

	// A2: create refused without get on the Secret; the message names the
	// user and the Secret.
	_, err := ids.Create(f.ctx, newIdentity(name, readable, &v1alpha1.AllowedNamespaces{List: []string{"team-a"}}), metav1.CreateOptions{})
	requireRefused(t, err, `"alice"`, ns+"/readable")

	// Granting get on that one Secret lets the same request through.
	f.grantSecret(controlplane.Alice, readable)
	var created *v1alpha1.TerraformClusterIdentity
	framework.Eventually(t, 30*time.Second, func() (bool, string) {
		created, err = ids.Create(f.ctx, newIdentity(name, readable, &v1alpha1.AllowedNamespaces{List: []string{"team-a", "team-b"}}), metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})

	update := func(edit func(*v1alpha1.TerraformClusterIdentity)) error {
		return updateIdentity(f.ctx, ids, name, edit)
	}
	// A3: secretRef to an unreadable Secret refused.
	requireRefused(t, update(func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.SecretRef = unreadable }), `"alice"`, ns+"/unreadable")

	// Bob may edit identities but read no Secret: widening refused,
	// narrowing and metadata edits allowed, so he can still revoke.
	f.grantIdentities(controlplane.Bob)
	bob := f.e.CaptfAs(t, controlplane.Bob).InfrastructureV1alpha1().TerraformClusterIdentities()
	bobUpdate := func(edit func(*v1alpha1.TerraformClusterIdentity)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := bob.Get(f.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			edit(cur)
			_, err = bob.Update(f.ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	requireRefused(t, bobUpdate(func(i *v1alpha1.TerraformClusterIdentity) {
		i.Spec.AllowedNamespaces.List = append(i.Spec.AllowedNamespaces.List, "team-c")
	}), `"bob"`, ns+"/readable")
	requireRefused(t, bobUpdate(func(i *v1alpha1.TerraformClusterIdentity) {
		i.Spec.AllowedNamespaces = &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}
	}), `"bob"`)
	if err := bobUpdate(func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces.List = []string{"team-a"} }); err != nil {
		t.Fatalf("A3: narrowing without get must be allowed: %v", err)
	}
	if err := bobUpdate(func(i *v1alpha1.TerraformClusterIdentity) { i.Labels = map[string]string{"owner": "bob"} }); err != nil {
		t.Fatalf("A3: a label edit without get must be allowed: %v", err)
	}
	// Alice (who may read it) may widen.
	if err := update(func(i *v1alpha1.TerraformClusterIdentity) {
		i.Spec.AllowedNamespaces.List = []string{"team-a", "team-z"}
	}); err != nil {
		t.Fatalf("A3: widening with get must be allowed: %v", err)
	}
	_ = created
	if err := ids.Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("A4: deleting an unused identity must be allowed: %v", err)
	}
}

// TestSelectorLabelSyntax covers the webhook part of A1.
func TestSelectorLabelSyntax(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "creds", nil)
	ref := f.secret(ns, "s")
	_, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(f.ctx, newIdentity(framework.Name("id"), ref,
		&v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "v"}}}), metav1.CreateOptions{})
	requireRefused(t, err, "spec.allowedNamespaces.selector")
}

// TestDeleteInUse covers A4: refused while an object resolves to the
// identity (through a cluster's defaults here), naming it; refused while
// mirrors remain; allowed once unused.
func TestDeleteInUse(t *testing.T) {
	f := setup(t)
	credNS := f.e.CreateNamespace(t, "creds", nil)
	tenant := f.e.CreateNamespace(t, "tenant", nil)
	ref := f.secret(credNS, "s")
	ids := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	clusterID, machineID := framework.Name("cluster-id"), framework.Name("machine-id")
	for _, n := range []string{clusterID, machineID} {
		if _, err := ids.Create(f.ctx, newIdentity(n, ref, &v1alpha1.AllowedNamespaces{List: []string{tenant}}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "c"},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: clusterID}, Defaults: &v1alpha1.ClusterDefaults{IdentityRef: &v1alpha1.IdentityReference{Name: machineID}}}}
	if _, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(tenant).Create(f.ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "m-0", Labels: map[string]string{v1alpha1.LabelClusterName: "c"}}}
	if _, err := f.e.Captf.InfrastructureV1alpha1().TerraformMachines(tenant).Create(f.ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The webhook reads informer caches: once the manager has reconciled
	// the machine, its cache holds it too.
	framework.Eventually(t, 30*time.Second, func() (bool, string) {
		got, err := f.e.Captf.InfrastructureV1alpha1().TerraformMachines(tenant).Get(f.ctx, m.Name, metav1.GetOptions{})
		return err == nil && got.Status.Identity == machineID, fmt.Sprintf("machine status.identity %q", got.Status.Identity)
	})
	framework.Eventually(t, 30*time.Second, func() (bool, string) {
		got, err := ids.Get(f.ctx, machineID, metav1.GetOptions{})
		return err == nil && len(got.Status.Namespaces) == 1, fmt.Sprintf("status.namespaces %v", got.Status.Namespaces)
	})
	requireRefused(t, ids.Delete(f.ctx, machineID, metav1.DeleteOptions{}), "TerraformMachine "+tenant+"/m-0")
	requireRefused(t, ids.Delete(f.ctx, clusterID, metav1.DeleteOptions{}), "TerraformCluster "+tenant+"/c")

	// Remove the users; the mirrors then go with them and the identity may go.
	if err := f.e.Captf.InfrastructureV1alpha1().TerraformMachines(tenant).Delete(f.ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(tenant).Delete(f.ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Without kube-controller-manager here, nothing garbage-collects the
	// mirror: status.namespaces keeps it listed and deletion stays refused,
	// naming the namespace.
	framework.Eventually(t, 30*time.Second, func() (bool, string) {
		err := ids.Delete(f.ctx, machineID, metav1.DeleteOptions{})
		return err != nil && strings.Contains(err.Error(), tenant) && !strings.Contains(err.Error(), "TerraformMachine"), fmt.Sprint(err)
	})
	secrets, err := f.e.Kube.CoreV1().Secrets(tenant).List(f.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMirrored + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if err := f.e.Kube.CoreV1().Secrets(tenant).Delete(f.ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{machineID, clusterID} {
		framework.Eventually(t, 30*time.Second, func() (bool, string) {
			err := ids.Delete(f.ctx, n, metav1.DeleteOptions{})
			return err == nil || apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
}

// TestFailClosed covers A4/A5's failurePolicy: with the manager stopped,
// identity create, update and delete are refused; workload kinds do not
// depend on the webhook; once a manager serves the webhook again, they work.
func TestFailClosed(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "creds", nil)
	ref := f.secret(ns, "s")
	ids := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	name := framework.Name("id")
	if _, err := ids.Create(f.ctx, newIdentity(name, ref, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.m.Stop(t)

	_, err := ids.Create(f.ctx, newIdentity(framework.Name("id"), ref, nil), metav1.CreateOptions{})
	requireFailedClosed(t, err)
	cur, err := ids.Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.AllowedNamespaces = &v1alpha1.AllowedNamespaces{List: []string{"x"}}
	_, err = ids.Update(f.ctx, cur, metav1.UpdateOptions{})
	requireFailedClosed(t, err)
	requireFailedClosed(t, ids.Delete(f.ctx, name, metav1.DeleteOptions{}))

	tenant := f.e.CreateNamespace(t, "tenant", nil)
	var captf versioned.Interface = f.e.Captf
	if _, err := captf.InfrastructureV1alpha1().TerraformClusters(tenant).Create(f.ctx, &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("workload kinds must not depend on the webhook: %v", err)
	}

	// The webhook back on the same address: requests work again.
	f.e.StartManager(t, framework.ManagerOptions{User: controlplane.Manager, Webhook: true, WebhookPort: f.m.WebhookPort, WebhookCertDir: f.certDir,
		Args: []string{"--webhook-client-ca=" + f.e.CP.WebhookClient.CAFile}})
	fresh := framework.Name("id")
	if _, err := ids.Create(f.ctx, newIdentity(fresh, ref, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("with the webhook healthy again, create must work: %v", err)
	}
	if err := ids.Delete(f.ctx, fresh, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("with the webhook healthy again, deleting an unused identity must work: %v", err)
	}
	requireRefused(t, ids.Delete(f.ctx, name, metav1.DeleteOptions{}), "TerraformCluster "+tenant+"/c")
}

func requireFailedClosed(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("with the webhook down the request must be refused (failurePolicy: Fail)")
	}
	if !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("want a webhook call failure, got %v", err)
	}
}

// updateIdentity edits identity name through ids (a user's client). The
// identity controller writes status concurrently: conflicts retry from a
// fresh read.
func updateIdentity(ctx context.Context, ids typedv1alpha1.TerraformClusterIdentityInterface, name string, edit func(*v1alpha1.TerraformClusterIdentity)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ids.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(cur)
		_, err = ids.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}
