package workload

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/credentials"
)

// I1, I2, I3: which identity each kind resolves to; the status records it
// and the mirror of that identity is the one written.
func TestSyncResolvesIdentity(t *testing.T) {
	clusterWith := func(identity string, defaults string) *v1alpha1.TerraformCluster {
		return newCluster("c1", func(c *v1alpha1.TerraformCluster) {
			c.Spec.IdentityRef = idRef(identity)
			if defaults != "" {
				c.Spec.Defaults = &v1alpha1.ClusterDefaults{IdentityRef: idRef(defaults)}
			}
		})
	}
	member := func(m metav1.Object) { m.SetLabels(map[string]string{v1alpha1.LabelClusterName: "c1"}) }
	tests := []struct {
		name string
		kind string
		obj  string
		objs []runtime.Object
		want string
	}{{
		name: "I1 cluster uses spec.identityRef, never its defaults",
		kind: v1alpha1.KindTerraformCluster, obj: "c1",
		objs: []runtime.Object{clusterWith("prod", "defaults")},
		want: "prod",
	}, {
		name: "I2 machine uses its own identityRef first",
		kind: v1alpha1.KindTerraformMachine, obj: "m1",
		objs: []runtime.Object{clusterWith("cluster-id", "defaults"), newMachine("m1", func(m *v1alpha1.TerraformMachine) {
			member(m)
			m.Spec.IdentityRef = idRef("own")
		})},
		want: "own",
	}, {
		name: "I2 machine without identityRef falls back to its cluster's defaults",
		kind: v1alpha1.KindTerraformMachine, obj: "m1",
		objs: []runtime.Object{clusterWith("cluster-id", "defaults"), newMachine("m1", func(m *v1alpha1.TerraformMachine) { member(m) })},
		want: "defaults",
	}, {
		name: "I2 machine without identityRef and cluster defaults falls back to the cluster's identityRef",
		kind: v1alpha1.KindTerraformMachine, obj: "m1",
		objs: []runtime.Object{clusterWith("cluster-id", ""), newMachine("m1", func(m *v1alpha1.TerraformMachine) { member(m) })},
		want: "cluster-id",
	}, {
		name: "I2 pool uses its own identityRef first",
		kind: v1alpha1.KindTerraformMachinePool, obj: "p1",
		objs: []runtime.Object{clusterWith("cluster-id", "defaults"), newPool("p1", func(p *v1alpha1.TerraformMachinePool) {
			member(p)
			p.Spec.IdentityRef = idRef("own")
		})},
		want: "own",
	}, {
		name: "I2 pool without identityRef falls back to its cluster's defaults",
		kind: v1alpha1.KindTerraformMachinePool, obj: "p1",
		objs: []runtime.Object{clusterWith("cluster-id", "defaults"), newPool("p1", func(p *v1alpha1.TerraformMachinePool) { member(p) })},
		want: "defaults",
	}, {
		name: "I2 machine belongs to the cluster carrying its cluster-name label",
		kind: v1alpha1.KindTerraformMachine, obj: "m1",
		objs: []runtime.Object{
			newCluster("infra", func(c *v1alpha1.TerraformCluster) {
				c.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"}
				c.Spec.IdentityRef = idRef("by-label")
			}),
			clusterWith("by-name", ""),
			newMachine("m1", func(m *v1alpha1.TerraformMachine) { member(m) }),
		},
		want: "by-label",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(newSource(sourceData()))
			for _, id := range []string{"prod", "own", "defaults", "cluster-id", "by-label", "by-name"} {
				f.seed(newIdentity(id, allowList(testNS)))
			}
			f.seed(tc.objs...)

			require.NoError(t, f.sync(tc.kind, tc.obj))

			st := f.lastStatus()
			require.Equal(t, tc.want, st.Identity)
			requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
			requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
			m := f.createdSecret()
			require.Equal(t, credentials.MirrorName(tc.want), m.Name)
			require.Equal(t, tc.want, m.Annotations[v1alpha1.AnnotationIdentity])
		})
	}
}

// I3: a machine without identityRef follows its cluster's current values:
// after the cluster's defaults change, its next reconcile uses the new
// identity (and releases the old mirror, V4).
func TestSyncMachineFollowsClusterDefaults(t *testing.T) {
	f := newFixture(t)
	cluster := newCluster("c1", func(c *v1alpha1.TerraformCluster) {
		c.Spec.Defaults = &v1alpha1.ClusterDefaults{IdentityRef: idRef("old")}
	})
	machine := newMachine("m1", func(m *v1alpha1.TerraformMachine) {
		m.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"}
		m.Spec.Source.Image = ""
	})
	f.seed(newSource(sourceData()), newIdentity("old", allowList(testNS)), newIdentity("new", allowList(testNS)), cluster, machine)

	require.NoError(t, f.sync(v1alpha1.KindTerraformMachine, "m1"))
	require.Equal(t, "old", f.lastStatus().Identity)
	f.catchUp()

	cluster.Spec.Defaults.IdentityRef = idRef("new")
	cluster.Generation = 2
	require.NoError(t, f.Captf.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("terraformclusters"), cluster, testNS))
	f.catchUp()

	require.NoError(t, f.sync(v1alpha1.KindTerraformMachine, "m1"))
	require.Equal(t, "new", f.lastStatus().Identity)
	w := f.writes()
	require.Contains(t, w, "delete secrets "+testNS+"/"+credentials.MirrorName("old"), "V4: the old mirror had no other owner")
	require.Contains(t, w, "create secrets "+testNS+"/"+credentials.MirrorName("new"))
}

// I2: nothing resolves, the identity does not exist, or its source Secret
// is missing: IdentityAllowed=False with the reason, no mirror, no Job, and
// one IdentityNotAllowed Warning event.
func TestSyncIdentityUnusable(t *testing.T) {
	tests := []struct {
		name         string
		kind, obj    string
		objs         []runtime.Object
		wantReason   v1alpha1.ConditionReason
		wantIdentity string
	}{{
		name: "I2 machine resolves to nothing (no identityRef, no cluster)",
		kind: v1alpha1.KindTerraformMachine, obj: "m1",
		objs:       []runtime.Object{newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newMachine("m1")},
		wantReason: v1alpha1.ReasonIdentityNotFound,
	}, {
		name: "I2 machine's cluster has no identity at all",
		kind: v1alpha1.KindTerraformMachine, obj: "m1",
		objs: []runtime.Object{newSource(sourceData()), newIdentity(identityName, allowList(testNS)),
			newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.IdentityRef = nil }),
			newMachine("m1", func(m *v1alpha1.TerraformMachine) { m.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"} })},
		wantReason: v1alpha1.ReasonIdentityNotFound,
	}, {
		name: "I2 cluster names an identity that does not exist",
		kind: v1alpha1.KindTerraformCluster, obj: "c1",
		objs:         []runtime.Object{newSource(sourceData()), newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.IdentityRef = idRef("missing") })},
		wantReason:   v1alpha1.ReasonIdentityNotFound,
		wantIdentity: "missing",
	}, {
		name: "I2 identity's source Secret is missing",
		kind: v1alpha1.KindTerraformCluster, obj: "c1",
		objs:         []runtime.Object{newIdentity(identityName, allowList(testNS)), newCluster("c1")},
		wantReason:   v1alpha1.ReasonSecretNotFound,
		wantIdentity: identityName,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(tc.objs...)

			require.NoError(t, f.sync(tc.kind, tc.obj))

			st := f.lastStatus()
			require.Equal(t, tc.wantIdentity, st.Identity)
			requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, tc.wantReason)
			requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending)
			requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)
			requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionFalse, tc.wantReason)
			require.Empty(t, f.createdJobs(), "no Job")
			f.requireNoMirrorWrite()
			require.Equal(t, []string{"Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))
			if tc.wantReason == v1alpha1.ReasonSecretNotFound {
				f.requireSourceReadUncached()
			}
		})
	}
}

// N1-N6 through the reconcile: which allowedNamespaces let an object in
// testNS use the identity. Namespace labels come from the Namespace
// informer (N5); `selector: {}` needs no Namespace (it is not seeded).
func TestSyncAllowedNamespaces(t *testing.T) {
	sel := func(ls metav1.LabelSelector) *metav1.LabelSelector { return &ls }
	devNS := newNamespace(testNS, map[string]string{"env": "dev"})
	prodNS := newNamespace(testNS, map[string]string{"env": "prod"})
	tests := []struct {
		name    string
		allowed *v1alpha1.AllowedNamespaces
		ns      *corev1.Namespace
		want    bool
	}{
		{name: "N1 unset allows no namespace", allowed: nil, ns: devNS, want: false},
		{name: "N2 list naming the namespace", allowed: allowList("x", testNS), want: true},
		{name: "N2 list not naming the namespace", allowed: allowList(otherNS), want: false},
		{name: "N2 empty list allows none", allowed: &v1alpha1.AllowedNamespaces{List: []string{}}, ns: devNS, want: false},
		{name: "N3 selector matching the namespace labels", allowed: &v1alpha1.AllowedNamespaces{Selector: sel(metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}})}, ns: devNS, want: true},
		{name: "N3 selector not matching the namespace labels", allowed: &v1alpha1.AllowedNamespaces{Selector: sel(metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}})}, ns: prodNS, want: false},
		{name: "N3 selector with the namespace unknown to the informer", allowed: &v1alpha1.AllowedNamespaces{Selector: sel(metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}})}, want: false},
		{name: "N4 selector {} allows every namespace without reading it", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}, want: true},
		{name: "N4 list and selector: union (selector matches)", allowed: &v1alpha1.AllowedNamespaces{List: []string{otherNS}, Selector: sel(metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}})}, ns: devNS, want: true},
		{name: "N4 list and selector: union (list matches)", allowed: &v1alpha1.AllowedNamespaces{List: []string{testNS}, Selector: sel(metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}})}, ns: prodNS, want: true},
		{name: "N6 invalid selector matches nothing", allowed: &v1alpha1.AllowedNamespaces{Selector: sel(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus", Values: []string{"dev"}}}})}, ns: devNS, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(newSource(sourceData()), newIdentity(identityName, tc.allowed), newCluster("c1"))
			if tc.ns != nil {
				f.seed(tc.ns)
			}

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			st := f.lastStatus()
			if tc.want {
				requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
				requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
				require.Equal(t, mirrorName, f.createdSecret().Name)
				return
			}
			c := requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotAllowed)
			require.Contains(t, c.Message, testNS)
			requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending)
			f.requireNoMirrorWrite()
			require.Empty(t, f.createdJobs())
		})
	}
}

// M1, M2, M3, M5: the mirror created has exactly the name, type, data,
// labels, annotations and one non-controller owner reference without
// blockOwnerDeletion; MirrorCreated event. The source is read uncached (M6).
func TestSyncCreatesMirror(t *testing.T) {
	for _, kind := range []string{v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			src := newSource(sourceData())
			src.Labels = map[string]string{"team": "payments"}
			src.Annotations = map[string]string{"note": "not copied"}
			src.Type = "example.com/custom"
			f.seed(src, newIdentity(identityName, allowList(testNS)))
			var obj metav1.Object
			switch kind {
			case v1alpha1.KindTerraformCluster:
				obj = newCluster("obj")
			case v1alpha1.KindTerraformMachine:
				obj = newMachine("obj", func(m *v1alpha1.TerraformMachine) { m.Spec.IdentityRef = idRef(identityName) })
			case v1alpha1.KindTerraformMachinePool:
				obj = newPool("obj", func(p *v1alpha1.TerraformMachinePool) { p.Spec.IdentityRef = idRef(identityName) })
			}
			f.seed(obj.(runtime.Object))

			require.NoError(t, f.sync(kind, "obj"))

			f.requireSourceReadUncached()
			m := f.createdSecret()
			require.Equal(t, "captf-creds-"+identityName, m.Name, "M1")
			require.Equal(t, testNS, m.Namespace)
			require.Equal(t, corev1.SecretTypeOpaque, m.Type, "M2: Opaque, not the source's type")
			require.Equal(t, sourceData(), m.Data, "M2: a byte copy of the data")
			require.Empty(t, m.StringData)
			require.Equal(t, map[string]string{v1alpha1.LabelMirrored: "true", v1alpha1.LabelManaged: "true"}, m.Labels, "M3")
			require.Equal(t, map[string]string{
				v1alpha1.AnnotationIdentity:   identityName,
				v1alpha1.AnnotationSourceHash: credentials.SourceHash(sourceData()),
			}, m.Annotations, "M3, M4")
			require.Equal(t, []metav1.OwnerReference{{
				APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1",
				Kind:       kind,
				Name:       "obj",
				UID:        obj.GetUID(),
			}}, m.OwnerReferences, "M5: non-controller, blockOwnerDeletion unset")
			require.Nil(t, m.OwnerReferences[0].Controller)
			require.Nil(t, m.OwnerReferences[0].BlockOwnerDeletion)
			events := f.PopEvents()
			require.Contains(t, eventReasons(events), "Normal "+v1alpha1.EventMirrorCreated)
		})
	}
}

// M8: a mirror deleted out of band is recreated on the next reconcile.
func TestSyncRecreatesDeletedMirror(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = "" }))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	f.catchUp()
	f.PopEvents()

	require.NoError(t, f.Kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), testNS, mirrorName))
	f.catchUp()
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Equal(t, []string{"create secrets " + testNS + "/" + mirrorName}, f.writes(), "no status change either: it was Mirrored before")
	require.Equal(t, []string{"Normal " + v1alpha1.EventMirrorCreated}, eventReasons(f.PopEvents()))
}

// M8: the mirror (and Job) event handler maps an object to its owners'
// queue keys: workload owners of our API group only.
func TestEnqueueOwners(t *testing.T) {
	f := newFixture(t)
	c1, m1, p1 := newCluster("c1"), newMachine("m1"), newPool("p1")
	f.seed(c1, m1, p1)
	m := newMirror(identityName, testNS, sourceData(),
		refOf(v1alpha1.KindTerraformCluster, c1),
		refOf(v1alpha1.KindTerraformMachine, m1),
		refOf(v1alpha1.KindTerraformMachinePool, p1),
		// Gone (B15): the garbage collector has not removed it yet.
		refOf(v1alpha1.KindTerraformCluster, newCluster("gone")),
		metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d1", UID: "uid-d1"},
		metav1.OwnerReference{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: v1alpha1.KindTerraformCluster, Name: "foreign", UID: "uid-f"},
	)

	before := freshness.Now()
	f.c.EnqueueOwners(m)

	want := map[string]string{v1alpha1.KindTerraformCluster: "c1", v1alpha1.KindTerraformMachine: "m1", v1alpha1.KindTerraformMachinePool: "p1"}
	for kind, name := range want {
		q := f.c.queues[kind]
		require.Equal(t, 1, q.Len(), kind)
		key, _ := q.Get()
		q.Done(key)
		require.Equal(t, cache.ObjectName{Namespace: testNS, Name: name}, key)
		require.Greater(t, q.AddedAt(key), before, "P1: a change's owners are stamped as they are added and read afresh")
	}
}

// S4, P1: the identity controller's enqueue of stale mirrors' owners is one
// batch with the stamp it passes (owners of our API group only); an owner
// that a later change enqueued keeps its later stamp.
func TestEnqueueOwnersStamped(t *testing.T) {
	f := newFixture(t)
	other := "ns-other"
	inOther := func(c *v1alpha1.TerraformCluster) { c.Namespace = other }
	c1, m1, c2, c3 := newCluster("c1"), newMachine("m1"), newCluster("c2", inOther), newCluster("c3", inOther)
	f.seed(c1, m1, c2, c3)
	a := newMirror(identityName, testNS, sourceData(),
		refOf(v1alpha1.KindTerraformCluster, c1),
		refOf(v1alpha1.KindTerraformMachine, m1),
		metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d1", UID: "uid-d1"},
		refOf(v1alpha1.KindTerraformMachine, newMachine("gone")), // B15
	)
	b := newMirror(identityName, other, sourceData(),
		refOf(v1alpha1.KindTerraformCluster, c2),
		refOf(v1alpha1.KindTerraformCluster, c3),
	)
	clusters := f.c.queues[v1alpha1.KindTerraformCluster]
	at := freshness.Now()
	clusters.Add(cache.ObjectName{Namespace: other, Name: "c3"}) // a change after the stamp
	changed := clusters.AddedAt(cache.ObjectName{Namespace: other, Name: "c3"})

	f.c.EnqueueOwnersStamped(at, a, b)

	want := map[string][]cache.ObjectName{
		v1alpha1.KindTerraformCluster: {{Namespace: testNS, Name: "c1"}, {Namespace: other, Name: "c2"}, {Namespace: other, Name: "c3"}},
		v1alpha1.KindTerraformMachine: {{Namespace: testNS, Name: "m1"}},
	}
	for kind, keys := range want {
		q := f.c.queues[kind]
		require.Equal(t, len(keys), q.Len(), kind)
		for _, key := range keys {
			if key.Name == "c3" {
				require.Equal(t, changed, q.AddedAt(key), "a later stamp is kept")
				continue
			}
			require.Equal(t, at, q.AddedAt(key), "%s: the batch's stamp", key)
		}
	}
	require.Zero(t, f.c.queues[v1alpha1.KindTerraformMachinePool].Len())
}

// M5: a reference with the same kind and name but an older UID (a deleted
// and re-created object) is replaced in place; other references are left
// alone; OwnerReferenceRepaired event.
func TestSyncRepairsOwnerReference(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = "" })
	oldRef := refOf(v1alpha1.KindTerraformCluster, c1)
	oldRef.UID = "uid-cluster-c1-old"
	foreign := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "keep-me", UID: "uid-deploy"}
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), foreign, oldRef))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	got, _, ok := f.patchedSecret()
	require.True(t, ok, "actions: %v", f.allActions())
	require.Equal(t, []metav1.OwnerReference{foreign, refOf(v1alpha1.KindTerraformCluster, c1)}, got.OwnerReferences, "replaced in place, others kept")
	require.Equal(t, []string{"patch secrets " + testNS + "/" + mirrorName, "update terraformclusters/status " + testNS + "/c1"}, f.writes())
	require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventOwnerReferenceRepaired)
}

// M2, M5: one mirror per namespace and identity, shared: two objects of
// one namespace using the identity both end up as owners, with one write.
func TestSyncSharedMirrorHasEveryOwner(t *testing.T) {
	t.Run("mirror created by the first user carries both", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = "" })
		m1 := newMachine("m1", func(m *v1alpha1.TerraformMachine) {
			m.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"}
			m.Spec.Source.Image = ""
		})
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, m1)

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
		require.ElementsMatch(t, []metav1.OwnerReference{refOf(v1alpha1.KindTerraformCluster, c1), refOf(v1alpha1.KindTerraformMachine, m1)}, f.createdSecret().OwnerReferences)
		f.catchUp()

		// The second user finds itself already there: no mirror write (M6).
		require.NoError(t, f.sync(v1alpha1.KindTerraformMachine, "m1"))
		f.requireNoMirrorWrite()
		requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	})
	t.Run("a user missing from an existing mirror is added, others kept", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = "" })
		p1 := newPool("p1", func(p *v1alpha1.TerraformMachinePool) {
			p.Spec.IdentityRef = idRef(identityName)
			p.Spec.Source.Image = ""
		})
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
			newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)))
		// p1 is new: the informer has it, the mirror does not name it yet.
		f.seed(p1)

		require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))
		got, _, ok := f.patchedSecret()
		require.True(t, ok)
		require.Equal(t, []metav1.OwnerReference{refOf(v1alpha1.KindTerraformCluster, c1), refOf(v1alpha1.KindTerraformMachinePool, p1)}, got.OwnerReferences)
	})
}

// M6: an unchanged pass writes nothing (no mirror write, no status write);
// a rotated source is copied with its new hash; the source is read with an
// uncached GET on every pass.
func TestSyncMirrorWritesOnlyOnChange(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))

	// First pass: the status is reported once.
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	f.requireNoMirrorWrite()
	require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1"}, f.writes())
	f.catchUp()

	// Unchanged pass: a GET of the source and nothing else.
	f.Clock.Step(syncPeriod)
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Empty(t, f.writes(), "an unchanged pass makes no write")
	require.Equal(t, []string{"get secrets " + sourceNS + "/" + sourceName}, f.readsOf("secrets"), "uncached read every pass")
	f.catchUp()

	// Rotation (R1): the next reconcile copies the new data and hash.
	rotated := sourceData()
	rotated["API_KEY"] = []byte("r0tated-VALUE-x1")
	f.Secrets = append(f.Secrets, "r0tated-VALUE-x1", credentials.SourceHash(rotated))
	require.NoError(t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), newSource(rotated), sourceNS))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Equal(t, []string{"patch secrets " + testNS + "/" + mirrorName}, f.writes(), "data and hash only; the status did not change")
	m, _, ok := f.patchedSecret()
	require.True(t, ok)
	require.Equal(t, rotated, m.Data)
	require.Equal(t, credentials.SourceHash(rotated), m.Annotations[v1alpha1.AnnotationSourceHash])
	require.Equal(t, []metav1.OwnerReference{refOf(v1alpha1.KindTerraformCluster, c1)}, m.OwnerReferences)
	require.Empty(t, f.createdJobs(), "R3: a rotation alone starts no Job")
}

// M6: what differs is repaired with a write: a missing label, a stale
// hash alone, data edited by someone; other labels and annotations kept.
func TestSyncMirrorRepairsDrift(t *testing.T) {
	c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = "" })
	tests := []struct {
		name  string
		drift func(*corev1.Secret)
	}{
		{"managed label removed", func(s *corev1.Secret) { delete(s.Labels, v1alpha1.LabelManaged) }},
		{"hash annotation edited", func(s *corev1.Secret) { s.Annotations[v1alpha1.AnnotationSourceHash] = "0000" }},
		{"data edited", func(s *corev1.Secret) { s.Data["API_KEY"] = []byte("tampered") }},
		{"key added", func(s *corev1.Secret) { s.Data["EXTRA"] = []byte("x") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m := newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1))
			m.Labels["other"] = "kept"
			m.Annotations["other"] = "kept"
			tc.drift(m)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, m)

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			got, _, ok := f.patchedSecret()
			require.True(t, ok, "actions: %v", f.allActions())
			require.Equal(t, sourceData(), got.Data)
			require.Equal(t, "true", got.Labels[v1alpha1.LabelManaged])
			require.Equal(t, "kept", got.Labels["other"])
			require.Equal(t, "kept", got.Annotations["other"])
			require.Equal(t, credentials.SourceHash(sourceData()), got.Annotations[v1alpha1.AnnotationSourceHash])
		})
	}
}

// M7: a Secret holding the mirror's name that is not this identity's
// mirror is never modified; CredentialsMirrored=False/MirrorFailed names
// it; a MirrorConflict Warning event; the sync returns nil (retried at the
// sync period, not hot); no Job; the conflict is recorded for the identity.
func TestSyncForeignSecretConflict(t *testing.T) {
	foreignUnlabelled := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: mirrorName, UID: "uid-foreign", ResourceVersion: "3"},
		Data:       map[string][]byte{"theirs": []byte("do-not-touch")},
	}
	otherIdentity := newMirror("someone-else", testNS, map[string][]byte{"theirs": []byte("do-not-touch")})
	otherIdentity.Name = mirrorName
	tests := []struct {
		name    string
		secret  *corev1.Secret
		visible bool // to the label-selected informer
		want    string
	}{
		{name: "M7 unlabelled Secret, invisible to the informer (create says AlreadyExists)", secret: foreignUnlabelled, want: "without the label " + v1alpha1.LabelMirrored},
		{name: "M7 mirror of another identity", secret: otherIdentity, visible: true, want: "TerraformClusterIdentity someone-else"},
		{name: "M7 mirror of another identity, not yet in the informer", secret: otherIdentity, want: "TerraformClusterIdentity someone-else"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1")
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1)
			if tc.visible {
				f.seed(tc.secret)
			} else {
				f.seedHidden(tc.secret)
			}

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"), "M7: no hot retry")

			if !tc.visible {
				// The informer cannot see it: the create is refused, then
				// an uncached read shows what holds the name.
				var seq []string
				for _, a := range f.allActions() {
					if a.resource == "secrets" && a.name == mirrorName {
						seq = append(seq, a.String())
					}
				}
				require.Equal(t, []string{"create secrets " + testNS + "/" + mirrorName, "get secrets " + testNS + "/" + mirrorName}, seq)
			}

			for _, a := range f.allActions() {
				if a.resource == "secrets" && (a.verb == "update" || a.verb == "delete") {
					t.Fatalf("M7: the foreign Secret was written: %s", a)
				}
			}
			require.Equal(t, tc.secret, f.storedSecret(testNS, mirrorName), "unchanged")
			st := f.lastStatus()
			requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
			c := requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionFalse, v1alpha1.ReasonMirrorFailed)
			require.Contains(t, c.Message, testNS+"/"+mirrorName)
			require.Contains(t, c.Message, tc.want)
			requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)
			require.Empty(t, f.createdJobs())
			events := f.PopEvents()
			require.Equal(t, []string{"Warning " + v1alpha1.EventMirrorConflict}, eventReasons(events))
			require.Contains(t, events[0], mirrorName)
			require.Equal(t, []string{testNS}, f.Tracker.Namespaces(identityName), "recorded for MirrorsConflicted")
			for _, q := range f.c.queues {
				controllertest.RequireNothingQueued(t, q, f.Clock, "no timed requeue: the resync retries")
			}

			// Once per change: the same conflict again emits no event.
			f.catchUp()
			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			require.Empty(t, f.PopEvents())
			// The informer cannot see an unlabelled Secret, so each pass
			// tries a create that the API server refuses; nothing else.
			for _, w := range f.writes() {
				require.Equal(t, "create secrets "+testNS+"/"+mirrorName, w, "no write but a refused create")
			}
			require.Equal(t, tc.secret, f.storedSecret(testNS, mirrorName))
		})
	}
}

// V1: an identity that no longer allows the namespace: the mirror is
// deleted whatever owners remain, IdentityAllowed=False/NamespaceNotAllowed,
// CredentialsMirrored=Unknown/MirrorPending, MirrorRemoved event, no Job.
func TestSyncRevokesDisallowedNamespace(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1")
	m1 := newMachine("m1", func(m *v1alpha1.TerraformMachine) { m.Spec.IdentityRef = idRef(identityName) })
	mirror := newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1), refOf(v1alpha1.KindTerraformMachine, m1))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(otherNS)), c1, m1, mirror)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	w := f.writeActions()
	require.Len(t, w, 2, "delete the mirror, write the status: %v", w)
	require.Equal(t, "delete secrets "+testNS+"/"+mirrorName, w[0].String())
	requireDeletePreconditions(t, w[0], mirror.UID, "")
	require.Empty(t, f.createdJobs())
	st := f.lastStatus()
	c := requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotAllowed)
	require.Contains(t, c.Message, identityName)
	require.Contains(t, c.Message, testNS)
	requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending)
	requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotAllowed)
	require.ElementsMatch(t, []string{"Normal " + v1alpha1.EventMirrorRemoved, "Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))
	require.Empty(t, f.readsOf("secrets"), "no source read for a namespace that is not allowed")
}

// V1, section 10: when the identity controller removed the mirror first
// (V5), the object that held it still reports MirrorRemoved, once.
func TestSyncRevocationReportedWhenTheMirrorIsAlreadyGone(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) {
		c.Status.Conditions = []metav1.Condition{{Type: string(v1alpha1.ConditionCredentialsMirrored), Status: metav1.ConditionTrue,
			Reason: string(v1alpha1.ReasonMirrored), LastTransitionTime: metav1.NewTime(controllertest.Epoch)}}
	})
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(otherNS)), c1)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.ElementsMatch(t, []string{"Normal " + v1alpha1.EventMirrorRemoved, "Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending)

	f.catchUp()
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Empty(t, eventReasons(f.PopEvents()), "one event per change, not per pass")
}

// V1: an object with an apply Job already: revocation leaves its Job and
// its finalizer alone (existing infrastructure stays) and starts no Job
// for a new generation.
func TestSyncRevocationKeepsExistingInfrastructure(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer, func(c *v1alpha1.TerraformCluster) { c.Generation = 2 })
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(otherNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Equal(t, []string{"delete secrets " + testNS + "/" + mirrorName, "update terraformclusters/status " + testNS + "/c1"}, f.writes())
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotAllowed)
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
}

// V4: a pool whose identityRef changed removes its owner reference from
// the old identity's mirror in its namespace, deleting that mirror with UID
// and resourceVersion preconditions when it was the last owner.
func TestSyncReleasesOldIdentityMirror(t *testing.T) {
	p1 := newPool("p1", func(p *v1alpha1.TerraformMachinePool) {
		p.Spec.IdentityRef = idRef("new")
		p.Spec.Source.Image = ""
	})
	other := newCluster("c9", func(c *v1alpha1.TerraformCluster) { c.Spec.IdentityRef = idRef("old") })
	oldName := credentials.MirrorName("old")
	tests := []struct {
		name   string
		owners []metav1.OwnerReference
		// want is the write to the old mirror.
		want string
	}{
		{name: "V4 last owner: the old mirror is deleted", owners: []metav1.OwnerReference{refOf(v1alpha1.KindTerraformMachinePool, p1)}, want: "delete secrets " + testNS + "/" + oldName},
		{name: "V4 other owners remain: only the reference goes", owners: []metav1.OwnerReference{refOf(v1alpha1.KindTerraformCluster, other), refOf(v1alpha1.KindTerraformMachinePool, p1)}, want: "patch secrets " + testNS + "/" + oldName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			old := newMirror("old", testNS, sourceData(), tc.owners...)
			old.ResourceVersion = "77"
			f.seed(newSource(sourceData()), newIdentity("old", allowList(testNS)), newIdentity("new", allowList(testNS)), p1, old, other)

			require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))

			w := f.writeActions()
			require.GreaterOrEqual(t, len(w), 2, "%v", w)
			require.Equal(t, tc.want, w[0].String())
			if w[0].verb == "delete" {
				requireDeletePreconditions(t, w[0], old.UID, "77")
				require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventMirrorRemoved)
			} else {
				require.Equal(t, []metav1.OwnerReference{refOf(v1alpha1.KindTerraformCluster, other)}, f.storedSecret(testNS, oldName).OwnerReferences)
				require.Contains(t, string(w[0].raw.(k8stesting.PatchAction).GetPatch()), `"resourceVersion":"77"`, "P3: preconditioned on the cached version")
			}
			require.Equal(t, "create secrets "+testNS+"/"+credentials.MirrorName("new"), w[1].String())
			require.Equal(t, "new", f.lastStatus().Identity)
		})
	}
}

// V4, V3, P3: a release is decided on the cache's copy and written with
// its resourceVersion as a precondition, so a new owner the cache has not
// seen yet wins: the delete is refused, a fresh uncached read shows the
// newcomer (B1), and the mirror is patched, not deleted.
func TestSyncReleaseConflictNewOwnerWins(t *testing.T) {
	f := newFixture(t)
	p1 := newPool("p1", func(p *v1alpha1.TerraformMachinePool) {
		p.Spec.IdentityRef = idRef("new")
		p.Spec.Source.Image = ""
	})
	oldName := credentials.MirrorName("old")
	cached := newMirror("old", testNS, sourceData(), refOf(v1alpha1.KindTerraformMachinePool, p1))
	f.seed(newSource(sourceData()), newIdentity("old", allowList(testNS)), newIdentity("new", allowList(testNS)), p1, cached)
	// Meanwhile another object became an owner.
	newcomer := metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.KindTerraformMachine, Name: "m2", UID: "uid-machine-m2"}
	fresh := cached.DeepCopy()
	fresh.OwnerReferences = append(fresh.OwnerReferences, newcomer)
	fresh.ResourceVersion = "43"
	require.NoError(t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), fresh, testNS))
	f.enforceDeletePreconditions()

	require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))

	var oldWrites []string
	for _, a := range f.allActions() {
		if a.name == oldName {
			oldWrites = append(oldWrites, a.String())
		}
	}
	require.Equal(t, []string{
		"delete secrets " + testNS + "/" + oldName, // refused: version 42 is not stored
		"get secrets " + testNS + "/" + oldName,
		"patch secrets " + testNS + "/" + oldName,
	}, oldWrites)
	got := f.storedSecret(testNS, oldName)
	require.NotNil(t, got, "the new owner won: not deleted")
	require.Equal(t, []metav1.OwnerReference{newcomer}, got.OwnerReferences)
}

// V4, M7, P3: a release decided on the cache's copy whose write is refused
// because the Secret has meanwhile stopped being a mirror (its label
// removed) leaves it alone: the fresh read shows a foreign Secret.
func TestSyncReleaseOfASecretNoLongerAMirror(t *testing.T) {
	f := newFixture(t)
	p1 := newPool("p1", func(p *v1alpha1.TerraformMachinePool) {
		p.Spec.IdentityRef = idRef("new")
		p.Spec.Source.Image = ""
	})
	oldName := credentials.MirrorName("old")
	other := refOf(v1alpha1.KindTerraformCluster, newCluster("c9"))
	cached := newMirror("old", testNS, sourceData(), refOf(v1alpha1.KindTerraformMachinePool, p1), other)
	f.seed(newSource(sourceData()), newIdentity("old", allowList(testNS)), newIdentity("new", allowList(testNS)), p1, cached)
	foreign := cached.DeepCopy()
	delete(foreign.Labels, v1alpha1.LabelMirrored)
	foreign.ResourceVersion = "43"
	require.NoError(t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), foreign, testNS))

	require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))

	var calls []string
	for _, a := range f.allActions() {
		if a.name == oldName {
			calls = append(calls, a.String())
		}
	}
	require.Equal(t, []string{
		"patch secrets " + testNS + "/" + oldName, // planned from the cache (42): Conflict
		"get secrets " + testNS + "/" + oldName,
	}, calls, "no second write")
	require.Equal(t, foreign, f.storedSecret(testNS, oldName), "M7: not modified")
}

// M6: the mirror exists on the API server but the informer has not seen it
// yet: the create meets AlreadyExists, the fresh read shows it current, and
// nothing is written.
func TestSyncMirrorNotYetInInformer(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = "" })
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1)
	f.seedHidden(newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Equal(t, []string{
		"create secrets " + testNS + "/" + mirrorName, // refused: AlreadyExists
		"update terraformclusters/status " + testNS + "/c1",
	}, f.writes())
	require.Contains(t, f.readsOf("secrets"), "get secrets "+testNS+"/"+mirrorName)
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	require.NotContains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventMirrorCreated)
}

// I2, M6: a source read that fails for another reason than NotFound is
// IdentityAllowed=Unknown/IdentityCheckFailed and an error (retried with
// backoff); no mirror write, no Job.
func TestSyncSourceReadError(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("c1"))
	f.prependKubeReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewTooManyRequests("slow down", 1)
	})

	err := f.sync(v1alpha1.KindTerraformCluster, "c1")

	require.Error(t, err)
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionUnknown, v1alpha1.ReasonIdentityCheckFailed)
	f.requireNoMirrorWrite()
	require.Empty(t, f.createdJobs())
}

// Section 13, M7: the record of a conflict (which the identity reports as
// status.mirrors.conflicted and MirrorsCurrent=False/MirrorsConflicted)
// must not outlive the objects that met it.
func TestSyncConflictRecordIsCleared(t *testing.T) {
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: mirrorName, UID: "uid-foreign"}}
	t.Run("M7 the only user in the namespace is deleted", func(t *testing.T) {
		f := newFixture(t)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("c1"))
		f.seedHidden(foreign)
		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
		require.Equal(t, []string{testNS}, f.Tracker.Namespaces(identityName))

		require.NoError(t, f.inf.Clusters.Informer().GetIndexer().Delete(newCluster("c1")))
		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		// Nobody re-records it: it expires (users re-record live conflicts
		// every sync period, R2).
		f.Clock.Step(controllertest.ConflictTTL + time.Second)
		require.Empty(t, f.Tracker.Namespaces(identityName), "no user of the identity is left in the namespace")
	})
	t.Run("V4 the only user switches to another identity", func(t *testing.T) {
		f := newFixture(t)
		p1 := newPool("p1", func(p *v1alpha1.TerraformMachinePool) {
			p.Spec.IdentityRef = idRef(identityName)
			p.Spec.Source.Image = ""
		})
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newIdentity("next", allowList(testNS)), p1)
		f.seedHidden(foreign)
		require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))
		require.Equal(t, []string{testNS}, f.Tracker.Namespaces(identityName))
		f.catchUp()

		p1.Spec.IdentityRef = idRef("next")
		p1.Generation = 2
		require.NoError(t, f.inf.Pools.Informer().GetIndexer().Update(p1))
		require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))

		require.Equal(t, "next", f.lastStatus().Identity)
		f.Clock.Step(controllertest.ConflictTTL + time.Second)
		require.Empty(t, f.Tracker.Namespaces(identityName), "no user of the old identity is left in the namespace")
	})
}

// M6, M7: a create refused with AlreadyExists whose fresh read then finds
// nothing (a Secret that keeps appearing and vanishing) is retried a
// bounded number of times, like every other mirror write.
func TestSyncMirrorCreateRetriesAreBounded(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("c1"))
	creates := 0
	f.prependKubeReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		creates++
		if creates > 50 {
			return true, nil, apierrors.NewInternalError(fmt.Errorf("test gives up"))
		}
		return true, nil, apierrors.NewAlreadyExists(corev1.Resource("secrets"), mirrorName)
	})

	_ = f.sync(v1alpha1.KindTerraformCluster, "c1")

	require.LessOrEqual(t, creates, maxWriteAttempts)
}

// Section 10: conditions follow the stored state even when the cache lags
// the manager's own last status write (found by the API server restart
// fault): a pass that fails the source read writes IdentityCheckFailed; the
// retry, before the cache has seen that write, computes the status the cache
// still shows and must write it, not skip it as unchanged.
func TestSyncStatusJudgedAgainstLastWriteNotOnlyCache(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("c1"))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
	f.catchUp() // the cache holds the converged status

	failures := 1
	f.prependKubeReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == sourceName && failures > 0 {
			failures--
			return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), sourceName, fmt.Errorf("permission cache warming up"))
		}
		return false, nil, nil
	})
	require.Error(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionUnknown, v1alpha1.ReasonIdentityCheckFailed)
	// B8: the mirror was not compared with its source: not reported current.
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending)

	// No catchUp: the cache still shows the converged status.
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
}

// Section 13, P3: a change that reaches every user of a shared mirror costs
// one write, even when the users reconcile before the cache shows that
// write: the first user's write is the version the others plan from, so
// they find the mirror current, with no write, no Conflict and no read of
// the mirror.
func TestSyncSharedMirrorOneWritePerChange(t *testing.T) {
	c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = "" })
	m1 := newMachine("m1", func(m *v1alpha1.TerraformMachine) {
		m.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"}
		m.Spec.Source.Image = ""
	})
	p1 := newPool("p1", func(p *v1alpha1.TerraformMachinePool) {
		p.Spec.IdentityRef = idRef(identityName)
		p.Spec.Source.Image = ""
	})
	users := []metav1.OwnerReference{refOf(v1alpha1.KindTerraformCluster, c1), refOf(v1alpha1.KindTerraformMachine, m1), refOf(v1alpha1.KindTerraformMachinePool, p1)}
	syncAll := func(f *fixture) {
		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
		require.NoError(t, f.sync(v1alpha1.KindTerraformMachine, "m1"))
		require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))
	}
	mirrorCalls := func(f *fixture) []string {
		var out []string
		for _, a := range f.allActions() {
			if a.resource == "secrets" && a.name == mirrorName {
				out = append(out, a.String())
			}
		}
		return out
	}
	t.Run("three new users: one create", func(t *testing.T) {
		f := newFixture(t)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, m1, p1)
		syncAll(f) // no catchUp: the cache never shows the create
		require.Equal(t, []string{"create secrets " + testNS + "/" + mirrorName}, mirrorCalls(f))
		require.ElementsMatch(t, users, f.storedSecret(testNS, mirrorName).OwnerReferences)
	})
	t.Run("rotation: one patch", func(t *testing.T) {
		f := newFixture(t)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, m1, p1,
			newMirror(identityName, testNS, sourceData(), users...))
		syncAll(f)
		f.catchUp()
		rotated := f.rotate()
		syncAll(f) // no catchUp between the users
		require.Equal(t, []string{"patch secrets " + testNS + "/" + mirrorName}, mirrorCalls(f))
		require.Equal(t, rotated, f.storedSecret(testNS, mirrorName).Data)
		for _, st := range f.statusWrites() {
			requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
		}
	})
}
