package admission

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// deleteBound is SPEC B13's: an identity DELETE with 10,000 users is
// answered within 1 s.
const deleteBound = time.Second

// TestB13DeleteWithTenThousandUsers: the webhook answers an identity
// DELETE with 10,000 users (clusters naming it, machines inheriting it
// from their clusters' defaults, pools naming it) within SPEC B13's 1 s,
// and with issue 20's attack, 1,500 clusters and 1,500 machines sharing one
// cluster-name label (n^3 before B13: the DELETE timed out and could never
// succeed). The webhook replica here does not lead (another holder keeps
// the Lease), as a second replica in production: the figure is the
// webhook's alone, not reconciles'.
func TestB13DeleteWithTenThousandUsers(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	lease := heldLease(t, e)
	dir, ca := framework.WebhookCert(t)
	m := e.StartManager(t, framework.ManagerOptions{User: controlplane.Manager, Webhook: true, WebhookCertDir: dir,
		Args: []string{"--webhook-client-ca=" + e.CP.WebhookClient.CAFile,
			"--leader-elect=true", "--leader-election-namespace=" + lease.Namespace, "--leader-election-id=" + lease.Name}})
	e.InstallWebhook(t, m, ca)
	f := &fixture{t: t, e: e, ctx: ctx, m: m, certDir: dir}
	ref := f.secret(f.e.CreateNamespace(t, "creds", nil), "s")
	ids := e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()

	t.Run("TenThousandUsers", func(t *testing.T) {
		id := framework.Name("b13-10k")
		if _, err := ids.Create(ctx, newIdentity(id, ref, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// 100 clusters over 10 namespaces, each with 66 machines that
		// inherit the identity from its defaults (the cluster itself uses
		// another), 33 pools naming it, and a second cluster naming it
		// itself: 10,000 users.
		var nss []string
		for range 10 {
			nss = append(nss, e.CreateNamespace(t, "b13", nil))
		}
		const clusters, inheriting, naming = 100, 66, 33
		err := faultkit.Parallel(ctx, clusters, 4, func(ctx context.Context, i int) error {
			ns, name := nss[i%len(nss)], fmt.Sprintf("c-%03d", i)
			c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: v1alpha1.TerraformClusterSpec{IdentityRef: idRef("other"), Defaults: &v1alpha1.ClusterDefaults{IdentityRef: idRef(id)}}}
			if _, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
				return err
			}
			own := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-own"},
				Spec: v1alpha1.TerraformClusterSpec{IdentityRef: idRef(id)}}
			if _, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, own, metav1.CreateOptions{}); err != nil {
				return err
			}
			for j := range inheriting {
				m := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-m%02d", name, j),
					Labels: map[string]string{v1alpha1.LabelClusterName: name}}}
				if _, err := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			for j := range naming {
				p := &v1alpha1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-p%02d", name, j)},
					Spec: v1alpha1.TerraformMachinePoolSpec{IdentityRef: idRef(id)}}
				if _, err := e.Captf.InfrastructureV1alpha1().TerraformMachinePools(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteWorkloads(t, f, nss...) })
		measureDelete(t, f, id, clusters*(1+inheriting+naming))

	})

	t.Run("SharedClusterNameLabel", func(t *testing.T) {
		id := framework.Name("b13-shared")
		if _, err := ids.Create(ctx, newIdentity(id, ref, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ns := e.CreateNamespace(t, "b13-shared", nil)
		const n = 1500
		label := map[string]string{v1alpha1.LabelClusterName: "shared"}
		err := faultkit.Parallel(ctx, n, 8, func(ctx context.Context, i int) error {
			c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c-%04d", i), Labels: label},
				Spec: v1alpha1.TerraformClusterSpec{IdentityRef: idRef(id)}}
			if _, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
				return err
			}
			m := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%04d", i), Labels: label}}
			_, err := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(ctx, m, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteWorkloads(t, f, ns) })
		measureDelete(t, f, id, 2*n)
	})
}

func idRef(name string) *v1alpha1.IdentityReference { return &v1alpha1.IdentityReference{Name: name} }

// heldLease creates a Lease in captf-system held by someone else for an
// hour: a manager pointed at it serves its webhook and never leads.
func heldLease(t *testing.T, e *framework.Env) *coordinationv1.Lease {
	t.Helper()
	now := metav1.NewMicroTime(time.Now())
	holder, seconds := "another-replica", int32(3600)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "captf-system", Name: framework.Name("held")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now}}
	l, err := e.Kube.CoordinationV1().Leases(l.Namespace).Create(framework.Context(t), l, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoordinationV1().Leases(l.Namespace).Delete(context.Background(), l.Name, metav1.DeleteOptions{})
	})
	return l
}

// usersLogged matches the count the webhook logs with an A4 refusal.
var usersLogged = regexp.MustCompile(`"Refused TerraformClusterIdentity request".*?identity="([^"]+)".*? users=(\d+)`)

// measureDelete waits until the webhook's caches hold all want users of id
// (its refusal log counts them), then times five DELETEs: each must be
// refused naming a user, and their median must be within deleteBound. It
// logs every figure and the webhook's own time from its metrics.
func measureDelete(t *testing.T, f *fixture, id string, want int) {
	t.Helper()
	ids := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	framework.Eventually(t, 5*time.Minute, func() (bool, string) {
		requireRefused(t, ids.Delete(f.ctx, id, metav1.DeleteOptions{}), "is in use by")
		got := -1
		for _, match := range usersLogged.FindAllStringSubmatch(f.m.Log(), -1) {
			if match[1] == id {
				got, _ = strconv.Atoi(match[2])
			}
		}
		return got == want, fmt.Sprintf("the webhook counted %d users of %s, want %d", got, id, want)
	})
	before := webhookDeleteSeconds(t, f.m)
	var took []time.Duration
	for range 5 {
		start := time.Now()
		err := ids.Delete(f.ctx, id, metav1.DeleteOptions{})
		took = append(took, time.Since(start))
		requireRefused(t, err, "is in use by")
	}
	after := webhookDeleteSeconds(t, f.m)
	slices.Sort(took)
	median := took[len(took)/2]
	t.Logf("B13: identity DELETE with %d users, refused through the API server in %v (median %v); the webhook's own time %.1f ms on average",
		want, took, median, 1000*(after.sum-before.sum)/max(1, after.count-before.count))
	if median > deleteBound {
		t.Errorf("B13: an identity DELETE with %d users took %v (median of 5), more than %v", want, median, deleteBound)
	}
}

type histogram struct{ sum, count float64 }

// webhookDeleteSeconds reads captf_admission_request_duration_seconds for
// DELETE from the manager's metrics.
func webhookDeleteSeconds(t *testing.T, m *framework.Manager) histogram {
	t.Helper()
	metrics, err := m.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	match := map[string]string{"operation": "DELETE"}
	return histogram{
		sum:   metrics.Sum("captf_admission_request_duration_seconds_sum", match),
		count: metrics.Sum("captf_admission_request_duration_seconds_count", match),
	}
}

// deleteWorkloads removes the workload objects of namespaces (there is no
// namespace controller here), so later tests' managers do not list them.
func deleteWorkloads(t *testing.T, f *fixture, namespaces ...string) {
	ctx := context.Background()
	c := f.e.Captf.InfrastructureV1alpha1()
	for _, ns := range namespaces {
		for _, err := range []error{
			c.TerraformMachines(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
			c.TerraformMachinePools(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
			c.TerraformClusters(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		} {
			if err != nil {
				t.Logf("cleaning up %s: %v", ns, err)
			}
		}
	}
}
