package workload

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
)

// T1: without spec.jobs.serviceAccountName the Job runs as captf-runner,
// which the manager creates with a RoleBinding to the ClusterRole
// captf-runner alone; each object whose Jobs use them is an owner.
func TestSyncCreatesRunnerServiceAccount(t *testing.T) {
	f := newFixture(t)
	c1, c2 := newCluster("c1"), newCluster("c2")
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, c2)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c2"))

	ctx := context.Background()
	sa, err := f.Kube.CoreV1().ServiceAccounts(testNS).Get(ctx, v1alpha1.RunnerName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, v1alpha1.LabelTrue, sa.Labels[v1alpha1.LabelManaged])
	require.Equal(t, []metav1.OwnerReference{refOf(v1alpha1.KindTerraformCluster, c1), refOf(v1alpha1.KindTerraformCluster, c2)}, sa.OwnerReferences,
		"one non-controller reference per user (M5 semantics)")
	rb, err := f.Kube.RbacV1().RoleBindings(testNS).Get(ctx, v1alpha1.RunnerName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: v1alpha1.RunnerName}, rb.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: v1alpha1.RunnerName, Namespace: testNS}}, rb.Subjects)
	require.Equal(t, sa.OwnerReferences, rb.OwnerReferences)
	for _, j := range f.createdJobs() {
		require.Equal(t, v1alpha1.RunnerName, j.Spec.Template.Spec.ServiceAccountName)
	}
	require.Len(t, f.createdJobs(), 2)
}

// T1: a ServiceAccount named in spec.jobs.serviceAccountName must exist and
// carry captf.io/runner=true; otherwise no Job starts (RunnerNotFound). A
// captf-runner the manager did not create is never modified.
func TestSyncRunnerNotFound(t *testing.T) {
	named := func(name string) func(*v1alpha1.TerraformCluster) {
		return func(c *v1alpha1.TerraformCluster) { c.Spec.Jobs.ServiceAccountName = name }
	}
	sa := func(name string, labels map[string]string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Labels: labels}}
	}
	for _, tc := range []struct {
		name    string
		cluster *v1alpha1.TerraformCluster
		sa      *corev1.ServiceAccount
		want    string // the Job's ServiceAccount, "" for RunnerNotFound
		msg     string
	}{
		{"named, missing", newCluster("c1", named("ops")), nil, "", "ops named in spec.jobs.serviceAccountName does not exist"},
		{"named, without the label", newCluster("c1", named("ops")), sa("ops", nil), "", "lacks the label captf.io/runner=true"},
		{"named, labelled", newCluster("c1", named("ops")), sa("ops", map[string]string{v1alpha1.LabelRunner: "true"}), "ops", ""},
		{"captf-runner is someone else's", newCluster("c1"), sa(v1alpha1.RunnerName, map[string]string{"team": "x"}), "", "was not created by captf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), tc.cluster)
			if tc.sa != nil {
				require.NoError(t, f.Kube.Tracker().Add(tc.sa))
			}

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			if tc.want != "" {
				require.Len(t, f.createdJobs(), 1)
				require.Equal(t, tc.want, f.createdJobs()[0].Spec.Template.Spec.ServiceAccountName)
				_, created := f.find("create", "serviceaccounts", "")
				require.False(t, created, "no captf-runner when the object names its own")
				return
			}
			require.Empty(t, f.createdJobs())
			c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunnerNotFound)
			require.Contains(t, c.Message, tc.msg)
			_, updated := f.find("update", "serviceaccounts", "")
			require.False(t, updated, "a ServiceAccount that is not captf's is never modified")
			// J8: an object that never started an apply has no finalizer.
			require.Empty(t, f.storedObj(v1alpha1.KindTerraformCluster, "c1").GetFinalizers(), "no Job started: no finalizer (J8)")
			// A ServiceAccount created or labelled later is seen without
			// waiting for the sync period.
			controllertest.RequireRequeuedAfter(t, f.c.queues[v1alpha1.KindTerraformCluster], f.Clock, cache.ObjectName{Namespace: testNS, Name: "c1"}, waitRequeue)
		})
	}
}

// T1, P1: the look after waitRequeue that RunnerNotFound asks for keeps the
// key's stamp (a wake, not a stamped add), so it reads the source only when
// the stamp says it must: objects waiting for a ServiceAccount cost no
// fresh source read each a minute (the ServiceAccount itself is read
// uncached on every pass anyway).
func TestRunnerNotFoundLooksAgainWithoutAFreshStamp(t *testing.T) {
	f := newFixture(t)
	cluster := newCluster("c1")
	cluster.Spec.Jobs.ServiceAccountName = "ops"
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), cluster)
	q, key := f.c.queues[v1alpha1.KindTerraformCluster], cache.ObjectName{Namespace: testNS, Name: "c1"}
	q.Add(key)
	f.queuedNames(v1alpha1.KindTerraformCluster)
	stamp := q.AddedAt(key)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunnerNotFound)
	f.Clock.Step(waitRequeue)

	require.Contains(t, f.queuedNames(v1alpha1.KindTerraformCluster), "c1", "looked at again after waitRequeue")
	require.Equal(t, stamp, q.AddedAt(key), "the look keeps the stamp of the last add")
}
