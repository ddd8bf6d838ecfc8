package main

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
)

// The plan's expected identities agree with the engine's resolution
// functions (I1-I3), and it exercises every path.
func TestSharedPlan(t *testing.T) {
	nss, ids, objs := sharedPlan(2000, 100, 10)
	if len(nss) != 100 || len(ids) != 10 || len(objs) != 2000 {
		t.Fatalf("plan sizes %d %d %d", len(nss), len(ids), len(objs))
	}
	clusters := map[string]*v1alpha1.TerraformCluster{}
	for _, o := range objs {
		if o.kind == kindCluster {
			c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: o.name, Annotations: standalone()},
				Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: o.own}}}
			if o.defaults != "" {
				c.Spec.Defaults = &v1alpha1.ClusterDefaults{IdentityRef: &v1alpha1.IdentityReference{Name: o.defaults}}
			}
			clusters[o.ns+"/"+o.name] = c
		}
	}
	sources := map[credentials.IdentitySource]int{}
	used := map[string]bool{}
	for _, o := range objs {
		used[o.want] = true
		if o.kind == kindCluster {
			if got := credentials.ClusterIdentity(clusters[o.ns+"/"+o.name]); got != o.want {
				t.Errorf("%s/%s: engine says %q, plan %q", o.ns, o.name, got, o.want)
			}
			continue
		}
		var own *v1alpha1.IdentityReference
		if o.own != "" {
			own = &v1alpha1.IdentityReference{Name: o.own}
		}
		got, src := credentials.MemberIdentity(own, clusters[o.ns+"/"+o.cluster])
		sources[src]++
		if got != o.want {
			t.Errorf("%s %s/%s: engine says %q, plan %q", o.kind, o.ns, o.name, got, o.want)
		}
	}
	if len(sources) < 3 {
		t.Errorf("members resolve through only %v", sources)
	}
	if len(used) != 10 {
		t.Errorf("only %d identities used", len(used))
	}
}

type fakeView struct {
	mirrors  map[string]*corev1.Secret
	statuses map[string]*v1alpha1.WorkloadStatus
}

func (f fakeView) mirror(ns, name string) *corev1.Secret { return f.mirrors[ns+"/"+name] }
func (f fakeView) status(kind, ns, name string) *v1alpha1.WorkloadStatus {
	return f.statuses[kind+"/"+ns+"/"+name]
}

// checkShared reports a lost owner reference, an extra one, a stale mirror
// and an unused mirror, and nothing when all is right.
func TestCheckShared(t *testing.T) {
	nss, ids, objs := sharedPlan(10, 1, 2)
	hashes := map[string]string{ids[0]: "h0", ids[1]: "h1"}
	expected := map[string]map[string][]*sharedObj{}
	v := fakeView{mirrors: map[string]*corev1.Secret{}, statuses: map[string]*v1alpha1.WorkloadStatus{}}
	for i, o := range objs {
		o.uid = types.UID(fmt.Sprint("uid-", i))
		if expected[o.ns] == nil {
			expected[o.ns] = map[string][]*sharedObj{}
		}
		expected[o.ns][o.want] = append(expected[o.ns][o.want], o)
		v.statuses[o.kind+"/"+o.ns+"/"+o.name] = &v1alpha1.WorkloadStatus{Identity: o.want, Conditions: []metav1.Condition{
			{Type: string(v1alpha1.ConditionCredentialsMirrored), Status: metav1.ConditionTrue}}}
	}
	for id, users := range expected[nss[0]] {
		m := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nss[0], Name: credentials.MirrorName(id),
			Annotations: map[string]string{v1alpha1.AnnotationSourceHash: hashes[id]}}}
		for _, u := range users {
			m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{Kind: u.kind, Name: u.name, UID: u.uid})
		}
		v.mirrors[nss[0]+"/"+m.Name] = m
	}
	b := &bench{}
	if p := b.checkShared(objs, nss, ids, expected, hashes, v); len(p) != 0 {
		t.Fatalf("a correct state has problems: %v", p)
	}
	m := v.mirrors[nss[0]+"/"+credentials.MirrorName(ids[0])]
	lostRef := m.OwnerReferences[0]
	m.OwnerReferences = m.OwnerReferences[1:]
	if p := b.checkShared(objs, nss, ids, expected, hashes, v); len(p) != 1 || !strings.Contains(p[0], "owner references") {
		t.Errorf("a lost owner reference: %v", p)
	}
	if lost, extra := ownerDiff(nss, ids, expected, v); lost != 1 || extra != 0 {
		t.Errorf("ownerDiff = %d lost, %d extra", lost, extra)
	}
	m.OwnerReferences = append(m.OwnerReferences, lostRef, metav1.OwnerReference{UID: "stranger"})
	if lost, extra := ownerDiff(nss, ids, expected, v); lost != 0 || extra != 1 {
		t.Errorf("ownerDiff = %d lost, %d extra", lost, extra)
	}
	if p := b.checkShared(objs, nss, ids, expected, hashes, v); len(p) != 1 {
		t.Errorf("an extra owner reference: %v", p)
	}
	m.OwnerReferences = m.OwnerReferences[:len(m.OwnerReferences)-1]
	m.Annotations[v1alpha1.AnnotationSourceHash] = "old"
	if p := b.checkShared(objs, nss, ids, expected, hashes, v); len(p) != 1 || !strings.Contains(p[0], "stale") {
		t.Errorf("a stale mirror: %v", p)
	}
	m.Annotations[v1alpha1.AnnotationSourceHash] = hashes[ids[0]]
	v.statuses[objs[0].kind+"/"+objs[0].ns+"/"+objs[0].name].Conditions[0].Status = metav1.ConditionFalse
	if p := b.checkShared(objs, nss, ids, expected, hashes, v); len(p) != 1 || !strings.Contains(p[0], "CredentialsMirrored=False") {
		t.Errorf("an object not mirrored: %v", p)
	}
}
