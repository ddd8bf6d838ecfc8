package load

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// TestBadInputSelectorManyNamespaces: an identity whose selector matches
// hundreds (full: 2,000) of namespaces. Mirrors land only where objects use
// the identity (M2), status.namespaces lists only those (S2), the manager
// makes no request per matching namespace (it reads labels from its
// Namespace informer, N5), and relabelling one namespace revokes it there
// (V1, V5).
func TestBadInputSelectorManyNamespaces(t *testing.T) {
	f := setup(t)
	e := f.Env
	count := scale(300, 2000)
	key := "captf-fault-sel-" + utilrand.String(6)
	pid := f.Manager.PID()
	rssBefore, _ := faultkit.RSS(pid)
	before := scrape(f)

	prefix := framework.Name("sel")
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	t.Cleanup(func() {
		// Deleted in the background: the namespace controller takes its time.
		_ = faultkit.Parallel(context.Background(), len(names), 16, func(ctx context.Context, i int) error {
			err := e.Kube.CoreV1().Namespaces().Delete(ctx, names[i], metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	})
	start := time.Now()
	err := faultkit.Parallel(f.Ctx, count, 16, func(ctx context.Context, i int) error {
		_, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{key: "yes"}}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	created := since(start)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{key: "yes"}}})
	// Users in three of them (spread out) and one in a namespace without the label.
	used := []string{names[0], names[count/2], names[count-1]}
	sort.Strings(used)
	users := map[string]workload{}
	for _, ns := range used {
		users[ns] = mustCreate(f, kindCluster, ns, "user", id, "")
	}
	outside := e.CreateNamespace(t, "unlabelled", nil)
	stranger := mustCreate(f, kindCluster, outside, "user", id, "")

	check := func(want []string) {
		t.Helper()
		f.WaitFor(fmt.Sprintf("mirrors exactly in %v", want), func() (bool, string) {
			ms, err := mirrorsOf(f.Ctx, e, id)
			if err != nil {
				return false, err.Error()
			}
			var got []string
			for ns := range ms {
				got = append(got, ns)
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				return false, fmt.Sprintf("mirrors in %d namespaces: %v", len(got), head(got, 5))
			}
			i := mustIdentity(f, id)
			if !slices.Equal(i.Status.Namespaces, want) || i.Status.Mirrors == nil || int(i.Status.Mirrors.Total) != len(want) {
				return false, fmt.Sprintf("status.namespaces %v, status.mirrors %+v", head(i.Status.Namespaces, 5), i.Status.Mirrors)
			}
			return true, ""
		})
	}
	check(used)
	f.WaitCondition(stranger.String(), conds(f, stranger), v1alpha1.ConditionIdentityAllowed, "False", v1alpha1.ReasonNamespaceNotAllowed)
	converged := since(start)
	after := scrape(f)
	rssAfter, _ := faultkit.RSS(pid)
	d := faultkit.Diff(before, after)
	t.Logf("selector: %d matching namespaces created in %s; mirrors only in the %d that have users, status.namespaces %v; converged %s after the first namespace",
		count, created, len(used), used, converged)
	t.Logf("selector: manager API requests meanwhile %.0f (%s); RSS %.1f -> %.1f MiB",
		d.TotalRequests(), faultkit.FormatCounts(d.Requests()), faultkit.MiB(rssBefore), faultkit.MiB(rssAfter))
	// Labels come from the informer: no request per namespace.
	if perNS := d.Requests()["get namespaces"] + d.Requests()["list namespaces"]; perNS > 2 {
		t.Errorf("N5: %.0f namespace reads; labels must come from the informer", perNS)
	}
	if total := d.TotalRequests(); total > float64(count)/2 {
		t.Errorf("%.0f API requests for %d namespaces: the manager must not work per matching namespace", total, count)
	}

	// Relabel one: its mirror goes (V1, V5), its user is not allowed.
	revoked := used[1]
	nsObj, err := e.Kube.CoreV1().Namespaces().Get(f.Ctx, revoked, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(nsObj.Labels, key)
	if _, err := e.Kube.CoreV1().Namespaces().Update(f.Ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	check([]string{used[0], used[2]})
	f.WaitCondition(users[revoked].String(), conds(f, users[revoked]), v1alpha1.ConditionIdentityAllowed, "False", v1alpha1.ReasonNamespaceNotAllowed)
}
