package manager

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/trim"
	captffake "github.com/captf/captf/pkg/generated/clientset/versioned/fake"
)

// B12: every informer the controllers request holds a type the caches'
// transform has a keep-list for, and holds it trimmed: an object of every
// kind created with a tenant's label and annotation is cached without them.
// A new informer added without a keep-list fails here.
func TestEveryInformerIsTrimmed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tenant := map[string]string{"tenant.example/big": "v"}
	meta := func(ns, name string, labels map[string]string) metav1.ObjectMeta {
		l := map[string]string{}
		for k, v := range tenant {
			l[k] = v
		}
		for k, v := range labels {
			l[k] = v
		}
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l, Annotations: tenant}
	}
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: meta("", "ns", nil)},
		&batchv1.Job{ObjectMeta: meta("ns", "j", map[string]string{v1alpha1.LabelManaged: v1alpha1.LabelTrue})},
		&corev1.Secret{ObjectMeta: meta("ns", "m", map[string]string{v1alpha1.LabelMirrored: v1alpha1.LabelTrue})},
	)
	captf := captffake.NewSimpleClientset(
		&v1alpha1.TerraformClusterIdentity{ObjectMeta: meta("", "id", nil)},
		&v1alpha1.TerraformCluster{ObjectMeta: meta("ns", "c", nil)},
		&v1alpha1.TerraformMachine{ObjectMeta: meta("ns", "m", nil)},
		&v1alpha1.TerraformMachinePool{ObjectMeta: meta("ns", "p", nil)},
		&v1alpha1.TerraformPlan{ObjectMeta: meta("ns", "p", nil)},
	)
	o := NewOptions()
	o.WebhookPort = 0
	d := withCaches(&Deps{Options: o, Kube: kube, Captf: captf, Recorder: record.NewFakeRecorder(10)})
	_, err := newControllers(ctx, d)
	require.NoError(t, err)

	started := map[reflect.Type]bool{}
	for _, f := range []interface {
		Start(<-chan struct{})
		WaitForCacheSync(<-chan struct{}) map[reflect.Type]bool
	}{d.Informers, d.JobInformers, d.MirrorInformers} {
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			require.True(t, ok, "%v synced", typ)
			started[typ] = true
		}
	}
	d.CaptfInformers.Start(ctx.Done())
	for typ, ok := range d.CaptfInformers.WaitForCacheSync(ctx.Done()) {
		require.True(t, ok, "%v synced", typ)
		started[typ] = true
	}
	require.Len(t, started, 8, "Namespaces, Jobs, Secrets, the four captf kinds and TerraformPlans (O8): %v", started)
	for typ := range started {
		require.True(t, trim.Handles(reflect.New(typ.Elem()).Interface()), "%v has no keep-list in pkg/controllers/trim", typ)
	}

	// The informers the controllers hold (the factories return the same
	// one per type) cache every object trimmed.
	captfInf := d.CaptfInformers.Infrastructure().V1alpha1()
	for _, inf := range []cache.SharedIndexInformer{
		d.Informers.Core().V1().Namespaces().Informer(),
		d.JobInformers.Batch().V1().Jobs().Informer(),
		d.MirrorInformers.Core().V1().Secrets().Informer(),
		captfInf.TerraformClusterIdentities().Informer(),
		captfInf.TerraformClusters().Informer(),
		captfInf.TerraformMachines().Informer(),
		captfInf.TerraformMachinePools().Informer(),
		captfInf.TerraformPlans().Informer(),
	} {
		objs := inf.GetStore().List()
		require.Len(t, objs, 1)
		m := objs[0].(metav1.Object)
		what := fmt.Sprintf("%T %s", objs[0], m.GetName())
		require.NotContains(t, m.GetAnnotations(), "tenant.example/big", what)
		if _, ns := objs[0].(*corev1.Namespace); ns {
			require.Contains(t, m.GetLabels(), "tenant.example/big", "namespace labels stay whole (N4)")
		} else {
			require.NotContains(t, m.GetLabels(), "tenant.example/big", what)
		}
	}
}
