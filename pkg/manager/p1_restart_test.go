package manager

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/capi"
	"github.com/captf/captf/pkg/controllers/workload"
	captffake "github.com/captf/captf/pkg/generated/clientset/versioned/fake"
)

// restartSources is the namespace of the test's source Secrets.
const restartSources = "captf-system"

// P1 at start-up (issue 25): a restart over converged objects reads each
// identity's source once. The identity controller opens its queue after
// the workload controller's (it waits for its batch, HasSynced) and polls
// for it, up to 100 ms later; a workload reconcile's read that began in
// between could not serve the identity's start-up pass, which read the
// source again: two GETs per identity on about half of all starts, with
// Cluster API served or not. Here the identity controller starts once the
// workload controller has opened its queues and had time to read, as the
// poll lets it: the workload's workers must wait for the identity's batch.
func TestRestartReadsEachSourceOnce(t *testing.T) {
	const identities, namespaces = 3, 12
	kube, captf := restartObjects(identities, namespaces)
	var reads, actions atomic.Int64
	kube.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		actions.Add(1)
		if g, ok := a.(k8stesting.GetAction); ok && a.GetNamespace() == restartSources && a.GetResource().Resource == "secrets" && g.GetName() != "" {
			reads.Add(1)
		}
		return false, nil, nil
	})
	captf.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		actions.Add(1)
		return false, nil, nil
	})
	idle := func(what string) {
		t.Helper()
		last, since := actions.Load(), time.Now()
		require.Eventually(t, func() bool {
			if n := actions.Load(); n != last {
				last, since = n, time.Now()
			}
			return time.Since(since) > time.Second
		}, 60*time.Second, 50*time.Millisecond, what)
	}

	// The first manager converges the objects (mirrors, status).
	stop := startRestartManager(t, kube, captf, false)
	idle("the first manager converges")
	stop()

	reads.Store(0)
	stop = startRestartManager(t, kube, captf, true)
	defer stop()
	idle("the restarted manager is idle")
	require.Equal(t, int64(identities), reads.Load(), "source GETs of the restart: one per identity")

	// A change after the start-up still reads afresh (P1): a new
	// generation (the fake does not count it itself).
	tc, err := captf.InfrastructureV1alpha1().TerraformClusters("ns0").Get(context.Background(), "c", metav1.GetOptions{})
	require.NoError(t, err)
	tc.Generation++
	_, err = captf.InfrastructureV1alpha1().TerraformClusters("ns0").Update(context.Background(), tc, metav1.UpdateOptions{})
	require.NoError(t, err)
	idle("the changed object's reconcile")
	require.Equal(t, int64(identities+1), reads.Load(), "a change's reconcile reads its source afresh")
}

// startRestartManager runs a manager's controllers on the clients, with
// Cluster API served (no Cluster API objects: they are standalone), and
// returns the function that stops it. When staged, the identity
// controller starts only once the workload controller has opened its
// queues and its workers, were they running, had time to read a source.
func startRestartManager(t *testing.T, kube *kubefake.Clientset, captf *captffake.Clientset, staged bool) (stop func()) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	o := NewOptions()
	o.WebhookPort = 0
	d := withCaches(&Deps{Options: o, Kube: kube, Captf: captf, Recorder: record.NewFakeRecorder(10000)})
	lists := map[schema.GroupVersionResource]string{
		capiv1.ClustersResource: "ClusterList", capiv1.MachinesResource: "MachineList", capiv1.MachinePoolsResource: "MachinePoolList",
	}
	var err error
	d.CAPI, err = capi.NewInformers(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists),
		metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), capi.Served{Clusters: true, Machines: true, MachinePools: true}, 0)
	require.NoError(t, err)
	d.CAPIServed = true
	controllers, err := newControllers(ctx, d)
	require.NoError(t, err)
	stopInformers := startInformers(ctx, d, newHealth())
	var wg sync.WaitGroup
	run := func(c Controller) { wg.Go(func() { c.Run(ctx, o.Workers) }) }
	var wl *workload.Controller
	for _, c := range controllers {
		if w, ok := c.(*workload.Controller); ok {
			wl = w
			run(c)
		}
	}
	if staged {
		require.Eventually(t, wl.HasSynced, 30*time.Second, time.Millisecond, "the workload controller opens its queues")
		time.Sleep(200 * time.Millisecond) // two of the identity controller's polls
	}
	for _, c := range controllers {
		if c != Controller(wl) {
			run(c)
		}
	}
	return func() {
		cancel()
		wg.Wait()
		_ = stopInformers()
	}
}

// restartObjects are identities sources and standalone TerraformClusters
// without a module, one per namespace, spread over the identities.
func restartObjects(identities, namespaces int) (*kubefake.Clientset, *captffake.Clientset) {
	var kobjs, cobjs []runtime.Object
	for k := range identities {
		name := fmt.Sprintf("s%d", k)
		kobjs = append(kobjs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: restartSources, Name: name}, Data: map[string][]byte{"KEY": []byte("v")}})
		cobjs = append(cobjs, &v1alpha1.TerraformClusterIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("id%d", k), Generation: 1},
			Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: v1alpha1.SecretReference{Namespace: restartSources, Name: name},
				AllowedNamespaces: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}},
		})
	}
	for i := range namespaces {
		ns := fmt.Sprintf("ns%d", i)
		kobjs = append(kobjs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		cobjs = append(cobjs, &v1alpha1.TerraformCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", Generation: 1,
				Annotations: map[string]string{v1alpha1.AnnotationStandalone: v1alpha1.LabelTrue}, Finalizers: []string{v1alpha1.FinalizerDestroy}},
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: fmt.Sprintf("id%d", i%identities)}},
		})
	}
	return kubefake.NewClientset(kobjs...), captffake.NewSimpleClientset(cobjs...)
}
