package load

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/integration/framework"
)

// maxSecretData is the API server's limit on a Secret's data (the sum of
// the values' lengths): core.MaxSecretSize, 1 MiB.
const maxSecretData = 1 << 20

// TestBadInputSources mirrors three unusual sources faithfully: one just
// below the API server's 1 MiB limit (binary data), one with no data, one
// whose keys are not environment variable names. The mirror's data is
// byte-identical (M2) and its hash the source's (M4); the identity's
// CredentialsValid names the keys envFrom will skip, never a value (C4,
// X1); the source is never written (V6).
func TestBadInputSources(t *testing.T) {
	f := setup(t)
	e := f.Env
	ns := e.CreateNamespace(t, "input", nil)
	creds := e.CreateNamespace(t, "creds", nil)

	blob := make([]byte, maxSecretData-1024)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	blob[len(blob)-1] = 'z' // no trailing whitespace: C4 would rightly report it
	cases := []struct {
		name string
		data map[string][]byte
		// valid is the expected CredentialsValid status; named the keys its
		// message must name.
		valid metav1.ConditionStatus
		named []string
	}{
		{"huge", map[string][]byte{"blob": blob, "AWS_SECRET_ACCESS_KEY": []byte(secretValue)}, metav1.ConditionTrue, nil},
		{"empty", nil, metav1.ConditionTrue, nil},
		{"odd-keys", map[string][]byte{"a.b": []byte(secretValue + "-ab"), "1x": []byte(secretValue + "-1x"), "with-dash": []byte(secretValue + "-wd"), "GOOD_KEY": []byte(secretValue)},
			metav1.ConditionFalse, []string{"a.b", "1x", "with-dash"}},
	}
	type made struct {
		id     string
		source *corev1.Secret
		user   workload
	}
	var all []made
	for _, c := range cases {
		s, err := e.Kube.CoreV1().Secrets(creds).Create(f.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: creds, Name: c.name}, Data: c.data}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating the %s source: %v", c.name, err)
		}
		id := f.Identity(v1alpha1.SecretReference{Namespace: creds, Name: c.name}, framework.List(ns))
		all = append(all, made{id: id, source: s, user: mustCreate(f, kindCluster, ns, c.name, id, "")})
	}
	for i, c := range cases {
		m := all[i]
		mirror := f.WaitMirror(ns, m.id, c.name+" mirror", func(s *corev1.Secret) bool {
			return s.Annotations[v1alpha1.AnnotationSourceHash] == credentials.SourceHash(m.source.Data)
		})
		if d := dataDiff(m.source.Data, mirror.Data); d != "" {
			t.Errorf("M2 %s: the mirror's data is not a byte copy of the source's: %s", c.name, d)
		}
		f.WaitCondition(m.user.String(), conds(f, m.user), v1alpha1.ConditionCredentialsMirrored, "True", v1alpha1.ReasonMirrored)
		f.WaitCondition("identity "+c.name, f.IdentityConds(m.id), v1alpha1.ConditionReady, "True", v1alpha1.ReasonSecretFound)
		reason := v1alpha1.ReasonKeysValid
		if c.valid == metav1.ConditionFalse {
			reason = v1alpha1.ReasonKeysNeedAttention
		}
		cond := f.WaitCondition("identity "+c.name, f.IdentityConds(m.id), v1alpha1.ConditionCredentialsValid, c.valid, reason)
		for _, k := range c.named {
			if !strings.Contains(cond.Message, k) {
				t.Errorf("C4 %s: CredentialsValid must name key %q: %q", c.name, k, cond.Message)
			}
		}
		if strings.Contains(cond.Message, secretValue) || (c.valid == metav1.ConditionFalse && strings.Contains(cond.Message, "GOOD_KEY")) {
			t.Errorf("C4/X1 %s: CredentialsValid shows a value or a key that needs no attention: %q", c.name, cond.Message)
		}
		total := 0
		for _, v := range mirror.Data {
			total += len(v)
		}
		t.Logf("input %s: mirror %s/%s holds %d keys, %d bytes, byte-identical to the source; identity CredentialsValid=%s/%s: %s",
			c.name, ns, mirror.Name, len(mirror.Data), total, cond.Status, cond.Reason, cond.Message)
	}
	// V6: the sources were never written.
	for i, c := range cases {
		s, err := e.Kube.CoreV1().Secrets(creds).Get(f.Ctx, c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.ResourceVersion != all[i].source.ResourceVersion {
			t.Errorf("V6: the %s source Secret was modified (resourceVersion %s -> %s)", c.name, all[i].source.ResourceVersion, s.ResourceVersion)
		}
	}
}

// dataDiff compares Secret data byte for byte; "" when equal.
func dataDiff(want, got map[string][]byte) string {
	var diffs []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			diffs = append(diffs, "missing key "+k)
		case !bytes.Equal(v, g):
			diffs = append(diffs, fmt.Sprintf("key %s differs (%d vs %d bytes)", k, len(v), len(g)))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "extra key "+k)
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// TestBadInputMissingReferences: identities naming a namespace or Secret
// that does not exist are Ready=False/SecretNotFound and their users
// IdentityAllowed=False/SecretNotFound (I2, S1); an identityRef to a missing
// identity, and machines and pools whose cluster does not exist, are
// IdentityAllowed=False/IdentityNotFound. None starts a Job or gets a
// mirror, and an object beside them with a good identity is unaffected.
func TestBadInputMissingReferences(t *testing.T) {
	f := setup(t)
	e := f.Env
	ns := e.CreateNamespace(t, "input", nil)
	good := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	control := mustCreate(f, kindCluster, ns, "control", good, "")
	creds := e.CreateNamespace(t, "creds", nil)
	noNamespace := f.Identity(v1alpha1.SecretReference{Namespace: framework.Name("no-such-namespace"), Name: "cloud"}, framework.List(ns))
	noSecret := f.Identity(v1alpha1.SecretReference{Namespace: creds, Name: "no-such-secret"}, framework.List(ns))
	missing := framework.Name("no-such-identity")

	type expect struct {
		w      workload
		reason v1alpha1.ConditionReason
	}
	var cases []expect
	cases = append(cases,
		expect{mustCreate(f, kindCluster, ns, "secret-namespace-missing", noNamespace, moduleImage), v1alpha1.ReasonSecretNotFound},
		expect{mustCreate(f, kindCluster, ns, "secret-missing", noSecret, moduleImage), v1alpha1.ReasonSecretNotFound},
		expect{mustCreate(f, kindCluster, ns, "identity-missing", missing, moduleImage), v1alpha1.ReasonIdentityNotFound},
		expect{mustCreate(f, kindMachine, ns, "machine-identity-missing", missing, moduleImage), v1alpha1.ReasonIdentityNotFound},
	)
	for _, kind := range []string{kindMachine, kindPool} {
		w, err := create(f.Ctx, e, kind, ns, "cluster-missing", "", moduleImage, map[string]string{v1alpha1.LabelClusterName: "no-such-cluster"})
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, expect{w, v1alpha1.ReasonIdentityNotFound})
	}
	for _, id := range []string{noNamespace, noSecret} {
		c := f.WaitCondition("identity "+id, f.IdentityConds(id), v1alpha1.ConditionReady, "False", v1alpha1.ReasonSecretNotFound)
		t.Logf("input: identity %s: Ready=%s/%s: %s", id, c.Status, c.Reason, c.Message)
	}
	for _, c := range cases {
		got := f.WaitCondition(c.w.String(), conds(f, c.w), v1alpha1.ConditionIdentityAllowed, "False", c.reason)
		t.Logf("input: %s: IdentityAllowed=%s/%s: %s", c.w, got.Status, got.Reason, got.Message)
	}
	f.WaitMirror(ns, good, "control mirror", func(m *corev1.Secret) bool { return sameUIDs(m, []workload{control}) == "" })
	f.WaitCondition(control.String(), conds(f, control), v1alpha1.ConditionCredentialsMirrored, "True", v1alpha1.ReasonMirrored)

	// Nothing else changes, over a few sync periods.
	until := time.Now().Add(2 * syncPeriod)
	for {
		if l, err := e.Kube.BatchV1().Jobs(ns).List(f.Ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
			t.Fatalf("I2: no Job may start for an object whose identity does not resolve: %d Jobs (%v)", len(l.Items), err)
		}
		for _, id := range []string{noNamespace, noSecret, missing} {
			ms, err := mirrorsOf(f.Ctx, e, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) > 0 {
				t.Fatalf("a mirror of %s exists", id)
			}
		}
		if m := f.Mirror(ns, good); m == nil || sameUIDs(m, []workload{control}) != "" {
			t.Fatalf("the control object's mirror changed")
		}
		if time.Now().After(until) {
			break
		}
		time.Sleep(time.Second) // a negative check over a window
	}
	s, err := get(f.Ctx, e, control)
	if err != nil || !condIs(s.Conditions, v1alpha1.ConditionIdentityAllowed, "True", "") {
		t.Errorf("the control object must stay allowed: %v%s", err, describeConds(s.Conditions))
	}
}

// maxName returns a DNS subdomain of exactly n characters starting with
// prefix and a random part.
func maxName(prefix string, n int) string {
	s := framework.Name(prefix) + "-"
	return s + strings.Repeat("x", n-len(s)-1) + "z"
}

// TestBadInputMaxLengthNames uses the longest names every kind allows: a
// 63-character namespace, a 253-character source Secret, identities of 253
// characters (the mirror name falls back to the hashed form, M1) and of 241
// (the longest whose mirror name, 253 characters, is not hashed), and
// 253-character cluster, machine and pool names: Jobs get valid names of at
// most 63 characters (J1), and the objects apply, destroy and clean up.
func TestBadInputMaxLengthNames(t *testing.T) {
	f := setup(t)
	e := f.Env
	nsName := maxName("maxlen", validation.DNS1123LabelMaxLength)
	if _, err := e.Kube.CoreV1().Namespaces().Create(f.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Namespaces().Delete(f.Ctx, nsName, metav1.DeleteOptions{}) })
	ns := nsName
	credsNS := maxName("creds", validation.DNS1123LabelMaxLength)
	if _, err := e.Kube.CoreV1().Namespaces().Create(f.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: credsNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Namespaces().Delete(f.Ctx, credsNS, metav1.DeleteOptions{}) })
	secretName := maxName("source", validation.DNS1123SubdomainMaxLength)
	data := framework.DefaultData(secretValue)
	if _, err := e.Kube.CoreV1().Secrets(credsNS).Create(f.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: credsNS, Name: secretName}, StringData: data}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := v1alpha1.SecretReference{Namespace: credsNS, Name: secretName}
	ids := map[int]string{}
	for _, n := range []int{253, 241} {
		name := maxName("id", n)
		id := &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: framework.List(ns)}}
		if _, err := e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(f.Ctx, id, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating a %d-character identity: %v", n, err)
		}
		t.Cleanup(func() {
			_ = e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(f.Ctx, name, metav1.DeleteOptions{})
		})
		ids[n] = name
	}
	// M1, computed here independently of credentials.MirrorName.
	sum := sha256.Sum256([]byte(ids[253]))
	hashed := v1alpha1.MirrorNamePrefix + hex.EncodeToString(sum[:])[:16]
	if got := credentials.MirrorName(ids[253]); got != hashed {
		t.Errorf("M1: the mirror of a 253-character identity is %q, want %q", got, hashed)
	}
	if got := credentials.MirrorName(ids[241]); got != v1alpha1.MirrorNamePrefix+ids[241] || len(got) != 253 {
		t.Errorf("M1: the mirror of a 241-character identity is %q (%d characters), want the plain 253-character form", got, len(got))
	}

	var objs []workload
	for _, kind := range kinds {
		objs = append(objs, mustCreate(f, kind, ns, maxName(strings.ToLower(kind[9:]), 253), ids[253], moduleImage))
	}
	objs = append(objs, mustCreate(f, kindCluster, ns, maxName("boundary", 253), ids[241], moduleImage))

	f.WaitFor("one apply Job per object", func() (bool, string) {
		per := jobsPerOwner(f, ns)
		return len(per) == len(objs), fmt.Sprintf("%d of %d", len(per), len(objs))
	})
	for key, names := range jobsPerOwner(f, ns) {
		for _, n := range names {
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 || len(n) > 63 {
				t.Errorf("J1: Job %q (%d characters) for %s is not a valid DNS label of at most 63: %v", n, len(n), key, errs)
			}
			if err := e.FinishJob(f.Ctx, ns, n, ""); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("input: Job %v (%d characters) for %s", names, len(names[0]), key)
	}
	for _, w := range objs {
		f.WaitCondition(w.Kind+" (253 characters)", conds(f, w), v1alpha1.ConditionReady, "True", v1alpha1.ReasonReady)
	}
	m := f.WaitMirror(ns, ids[253], "hashed mirror", func(s *corev1.Secret) bool { return sameUIDs(s, objs[:3]) == "" })
	if m.Name != hashed {
		t.Errorf("M1: mirror %q, want %q", m.Name, hashed)
	}
	f.WaitMirror(ns, ids[241], "253-character mirror", func(s *corev1.Secret) bool { return sameUIDs(s, objs[3:]) == "" })
	f.WaitIdentityNamespaces(ids[253], []string{ns})
	t.Logf("input: the 253-character identity's mirror is %s; the 241-character identity's is its 253-character plain form", m.Name)

	// Deletion: destroy Jobs with valid names, then cleanup (V3).
	for _, w := range objs {
		if err := del(f.Ctx, e, w); err != nil {
			t.Fatal(err)
		}
	}
	fin := startFinisher(f, time.Second, ns)
	f.WaitFor("every object destroyed and gone", func() (bool, string) {
		for _, w := range objs {
			if s, err := get(f.Ctx, e, w); err != nil || s.Exists {
				return false, fmt.Sprintf("%s still there (%v):%s", w.Kind, err, describeConds(s.Conditions))
			}
		}
		return true, ""
	})
	fin.Stop()
	for key, names := range jobsPerOwner(f, ns) {
		for _, n := range names {
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				t.Errorf("J1: Job %q for %s: %v", n, key, errs)
			}
		}
	}
	f.WaitNoMirror(ns, ids[253])
	f.WaitNoMirror(ns, ids[241])
	// Events name their object; a 253-character name leaves no room for
	// the recorder's suffix, so the API server refuses them.
	rejected := 0
	for _, l := range strings.Split(f.Manager.Log(), "\n") {
		if strings.Contains(l, "rejected event") && strings.Contains(l, ns) {
			rejected++
		}
	}
	evs, _ := e.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{})
	t.Logf("input: events recorded in the 63-character namespace: %d; events refused by the API server (manager log): %d", len(evs.Items), rejected)
	if c := meta.FindStatusCondition(mustIdentity(f, ids[253]).Status.Conditions, string(v1alpha1.ConditionReady)); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the 253-character identity must be Ready: %+v", c)
	}
}

func mustIdentity(f *framework.Fixture, name string) *v1alpha1.TerraformClusterIdentity {
	f.T.Helper()
	i, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return i
}
