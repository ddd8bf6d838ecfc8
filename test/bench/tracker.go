package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// tracker watches what the manager produces, so the benchmark sees each
// change as it happens without GETting objects one by one: the mirrors (a
// watch restricted to captf.io/mirrored=true, as the manager's own) and
// the three workload kinds. Convergence checks read these caches; final
// verifications read fresh LISTs from the API server.
type tracker struct {
	mirrors, clusters, machines, pools cache.SharedIndexInformer

	mu sync.Mutex
	// hw, when set, records when each mirror of an identity was first seen
	// carrying a hash (rotation).
	hw *hashWatch
}

// hashWatch records first-seen times of a hash on an identity's mirrors.
type hashWatch struct {
	identity, name, hash string
	seen                 map[string]time.Time // namespace -> first seen
}

func startTracker(ctx context.Context, e *env) (*tracker, error) {
	kf := kubeinformers.NewSharedInformerFactoryWithOptions(e.kube, 0, kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue
	}))
	cf := captfinformers.NewSharedInformerFactory(e.captf, 0)
	t := &tracker{
		mirrors:  kf.Core().V1().Secrets().Informer(),
		clusters: cf.Infrastructure().V1alpha1().TerraformClusters().Informer(),
		machines: cf.Infrastructure().V1alpha1().TerraformMachines().Informer(),
		pools:    cf.Infrastructure().V1alpha1().TerraformMachinePools().Informer(),
	}
	onMirror := func(obj interface{}) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		now := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		if hw := t.hw; hw != nil && s.Name == hw.name && s.Annotations[v1alpha1.AnnotationIdentity] == hw.identity &&
			s.Annotations[v1alpha1.AnnotationSourceHash] == hw.hash {
			if _, ok := hw.seen[s.Namespace]; !ok {
				hw.seen[s.Namespace] = now
			}
		}
	}
	if _, err := t.mirrors.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onMirror,
		UpdateFunc: func(_, n interface{}) { onMirror(n) },
	}); err != nil {
		return nil, err
	}
	kf.Start(ctx.Done())
	cf.Start(ctx.Done())
	for typ, ok := range kf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("tracker: %v cache did not sync", typ)
		}
	}
	for typ, ok := range cf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("tracker: %v cache did not sync", typ)
		}
	}
	return t, nil
}

// watchHash starts recording when each mirror of identity carries hash.
func (t *tracker) watchHash(identity, name, hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hw = &hashWatch{identity: identity, name: name, hash: hash, seen: map[string]time.Time{}}
}

// seenHash returns a copy of the first-seen times recorded so far.
func (t *tracker) seenHash() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]time.Time{}
	if t.hw != nil {
		for k, v := range t.hw.seen {
			out[k] = v
		}
	}
	return out
}

func (t *tracker) stopHash() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hw = nil
}

// mirror returns the cached mirror ns/name, or nil.
func (t *tracker) mirror(ns, name string) *corev1.Secret {
	o, ok, _ := t.mirrors.GetStore().GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	return o.(*corev1.Secret)
}

// status returns the cached status of a workload object (nil if absent).
func (t *tracker) status(kind, ns, name string) *v1alpha1.WorkloadStatus {
	var inf cache.SharedIndexInformer
	switch kind {
	case kindCluster:
		inf = t.clusters
	case kindMachine:
		inf = t.machines
	case kindPool:
		inf = t.pools
	}
	o, ok, _ := inf.GetStore().GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	switch x := o.(type) {
	case *v1alpha1.TerraformCluster:
		return &x.Status
	case *v1alpha1.TerraformMachine:
		return &x.Status
	case *v1alpha1.TerraformMachinePool:
		return &x.Status
	}
	return nil
}

// objects is the number of cached workload objects.
func (t *tracker) objects() (clusters, machines, pools int) {
	return len(t.clusters.GetStore().ListKeys()), len(t.machines.GetStore().ListKeys()), len(t.pools.GetStore().ListKeys())
}

// Kind names, as in owner references.
const (
	kindCluster = "TerraformCluster"
	kindMachine = "TerraformMachine"
	kindPool    = "TerraformMachinePool"
)

// mirrored reports whether a status has CredentialsMirrored=True.
func mirrored(s *v1alpha1.WorkloadStatus) bool {
	if s == nil {
		return false
	}
	return meta.IsStatusConditionTrue(s.Conditions, string(v1alpha1.ConditionCredentialsMirrored))
}

// describeStatus is a short description for failure messages.
func describeStatus(s *v1alpha1.WorkloadStatus) string {
	if s == nil {
		return "not found"
	}
	c := meta.FindStatusCondition(s.Conditions, string(v1alpha1.ConditionCredentialsMirrored))
	if c == nil {
		return "no CredentialsMirrored condition"
	}
	return fmt.Sprintf("CredentialsMirrored=%s/%s %q", c.Status, c.Reason, c.Message)
}

// waitFor polls cond every interval until it holds; it returns the time
// of the first check that held. On timeout the error carries the last
// message of cond.
func waitFor(ctx context.Context, what string, timeout, interval time.Duration, cond func() (bool, string)) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		now := time.Now()
		if ok {
			return now, nil
		}
		if now.After(deadline) {
			return now, fmt.Errorf("%s: not reached within %s; last seen: %s", what, timeout, msg)
		}
		select {
		case <-ctx.Done():
			return now, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// waitIdle waits until the manager's queues are empty and it has made no
// API request for the quiet period. It returns the last scrape and the
// time activity was last seen.
func (e *env) waitIdle(ctx context.Context) (faultkit.Metrics, time.Time, error) {
	lastReqs := -1.0
	lastActive := time.Now()
	deadline := time.Now().Add(e.cfg.Timeout)
	for {
		m, err := e.mgr.metrics(ctx)
		if err != nil {
			return nil, lastActive, err
		}
		now := time.Now()
		reqs := m.Sum("captf_api_requests_total", nil)
		busy := m.Sum("workqueue_depth", nil) > 0 || m.Sum("workqueue_unfinished_work_seconds", nil) > 0
		switch {
		case busy || reqs != lastReqs:
			lastReqs = reqs
			lastActive = now
		case now.Sub(lastActive) >= e.cfg.Quiet:
			return m, lastActive, nil
		}
		if now.After(deadline) {
			return m, lastActive, fmt.Errorf("manager %s not idle within %s", e.mgr.name, e.cfg.Timeout)
		}
		select {
		case <-ctx.Done():
			return nil, lastActive, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
