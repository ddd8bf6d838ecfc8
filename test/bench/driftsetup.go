package main

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// The drift scenario's objects.

// createDriftClusters creates the namespaces (each with its default
// ServiceAccount, for the finisher's pods), the identity and n clusters
// with a module, and returns their keys.
func (b *bench) createDriftClusters(ctx context.Context, n int) ([]string, error) {
	nss := make([]string, b.cfg.DriftNamespaces)
	for i := range nss {
		nss[i] = fmt.Sprintf("bench-drift-%03d", i)
	}
	if err := b.createNamespaces(ctx, nss, nil); err != nil {
		return nil, err
	}
	if err := b.defaultServiceAccounts(ctx, nss); err != nil {
		return nil, err
	}
	if err := b.createSource(ctx, driftIdentity, credentialData()); err != nil {
		return nil, err
	}
	if err := b.createIdentity(ctx, driftIdentity, driftIdentity, &v1alpha1.AllowedNamespaces{List: nss}); err != nil {
		return nil, err
	}
	keys, err := b.createClusters(ctx, nss, n, "d", driftIdentity, "example.com/bench-drift-module:1")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "created %d clusters with a module in %d namespaces\n", n, len(nss))
	return keys, nil
}

// pauseRan pauses (cluster.x-k8s.io/paused, T5) every workload object of
// an earlier scenario that ever ran a Job: the drift manager would
// otherwise check them too, an interval after their applies.
func (b *bench) pauseRan(ctx context.Context) (int, error) {
	type target struct{ kind, ns, name string }
	var ts []target
	for _, kind := range []string{kindCluster, kindMachine, kindPool} {
		for _, key := range b.storeKeys(kind) {
			ns, name, _ := strings.Cut(key, "/")
			if s := b.t.status(kind, ns, name); s != nil && (s.LastJob != nil || s.LastApply != nil) {
				ts = append(ts, target{kind, ns, name})
			}
		}
	}
	if len(ts) == 0 {
		return 0, nil
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, v1alpha1.AnnotationPaused))
	api := b.e.captf.InfrastructureV1alpha1()
	err := parallel(ctx, len(ts), b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		t := ts[i]
		var err error
		switch t.kind {
		case kindCluster:
			_, err = api.TerraformClusters(t.ns).Patch(ctx, t.name, types.MergePatchType, patch, metav1.PatchOptions{})
		case kindMachine:
			_, err = api.TerraformMachines(t.ns).Patch(ctx, t.name, types.MergePatchType, patch, metav1.PatchOptions{})
		case kindPool:
			_, err = api.TerraformMachinePools(t.ns).Patch(ctx, t.name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		return err
	})
	fmt.Fprintf(b.log, "paused %d workload objects of earlier scenarios that ran Jobs\n", len(ts))
	return len(ts), err
}

// defaultServiceAccounts creates each namespace's "default"
// ServiceAccount, which the API server's ServiceAccount admission asks of
// a pod and which no controller makes here.
func (b *bench) defaultServiceAccounts(ctx context.Context, nss []string) error {
	return parallel(ctx, len(nss), b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: nss[i], Name: "default"}}
		_, err := b.e.kube.CoreV1().ServiceAccounts(nss[i]).Create(ctx, sa, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}
