package identity

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
)

// canary stands for content that must never reach a message or a log line
// (SPEC X1). The webhook never sees a Secret, so it rides in an annotation of
// every identity the tests send: only names may be echoed.
const canary = "AKIA-X1-CANARY-identity-0c7e55"

// policyDetail is authorizer text that must stay out of refusal messages.
const policyDetail = `policy "tenant-isolation-7f3a"`

const (
	identityName = "team-a"
	secretNS     = "captf-system"
	secretName   = "aws-credentials"
)

// alice is the requesting user of most cases, with every field a
// SubjectAccessReview must carry over.
var alice = authenticationv1.UserInfo{
	Username: "alice@example.com",
	UID:      "5a1f3c2e-alice",
	Groups:   []string{"team-a-admins", "system:authenticated"},
	Extra: map[string]authenticationv1.ExtraValue{
		"example.com/scopes":                     {"infra", "read"},
		"authentication.kubernetes.io/node-name": {"node-1"},
	},
}

// wantSARSpec is the review A2 and A3 require for user on Secret ns/name.
func wantSARSpec(user authenticationv1.UserInfo, ns, name string) authorizationv1.SubjectAccessReviewSpec {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	return authorizationv1.SubjectAccessReviewSpec{
		User:   user.Username,
		UID:    user.UID,
		Groups: user.Groups,
		Extra:  extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "get", Group: "", Version: "v1", Resource: "secrets", Namespace: ns, Name: name,
		},
	}
}

// sarAnswer is what the fake authorizer says.
type sarAnswer struct {
	allowed         bool
	denied          bool
	reason          string
	evaluationError string
	err             error
}

var (
	sarAllow = sarAnswer{allowed: true, reason: `RBAC: allowed by RoleBinding "secret-readers/captf-system"`}
	// sarDeny's reason names a policy: it goes to the log, never to the
	// requesting user (see doc.go).
	sarDeny  = sarAnswer{denied: true, reason: "webhook authorizer: " + policyDetail + " forbids"}
	sarError = sarAnswer{err: errors.New("the server is currently unable to handle the request")}
)

// fakeSAR is a clientset whose subjectaccessreviews/create answers per
// request and records every review it gets.
type fakeSAR struct {
	client *fake.Clientset
	mu     sync.Mutex
	specs  []authorizationv1.SubjectAccessReviewSpec
}

// newFakeSAR answers with answer(spec) for each review.
func newFakeSAR(answer func(authorizationv1.SubjectAccessReviewSpec) sarAnswer) *fakeSAR {
	f := &fakeSAR{client: fake.NewClientset()}
	f.client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		f.mu.Lock()
		f.specs = append(f.specs, review.Spec)
		f.mu.Unlock()
		a := answer(review.Spec)
		if a.err != nil {
			return true, nil, a.err
		}
		review.Status = authorizationv1.SubjectAccessReviewStatus{
			Allowed: a.allowed, Denied: a.denied, Reason: a.reason, EvaluationError: a.evaluationError,
		}
		return true, review, nil
	})
	return f
}

func (f *fakeSAR) reviews() []authorizationv1.SubjectAccessReviewSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]authorizationv1.SubjectAccessReviewSpec(nil), f.specs...)
}

// fakeUsers stands in for index.Resolver.Users and records the identities
// it was asked about.
type fakeUsers struct {
	refs  []index.Ref
	err   error
	mu    sync.Mutex
	asked []string
}

func (u *fakeUsers) Users(identity string) ([]index.Ref, error) {
	u.mu.Lock()
	u.asked = append(u.asked, identity)
	u.mu.Unlock()
	if u.err != nil {
		return nil, u.err
	}
	return u.refs, nil
}

func (u *fakeUsers) calls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.asked...)
}

// newIdentity is the identity most cases start from: Secret
// captf-system/aws-credentials, allowed in ns-a and ns-b, with the canary in
// an annotation.
func newIdentity(mods ...func(*v1alpha1.TerraformClusterIdentity)) *v1alpha1.TerraformClusterIdentity {
	obj := &v1alpha1.TerraformClusterIdentity{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "TerraformClusterIdentity"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            identityName,
			UID:             "uid-team-a",
			ResourceVersion: "41",
			Annotations:     map[string]string{"example.com/note": canary},
		},
		Spec: v1alpha1.TerraformClusterIdentitySpec{
			SecretRef:         v1alpha1.SecretReference{Namespace: secretNS, Name: secretName},
			AllowedNamespaces: &v1alpha1.AllowedNamespaces{List: []string{"ns-a", "ns-b"}},
		},
	}
	for _, mod := range mods {
		mod(obj)
	}
	return obj
}

func withSecret(ns, name string) func(*v1alpha1.TerraformClusterIdentity) {
	return func(o *v1alpha1.TerraformClusterIdentity) {
		o.Spec.SecretRef = v1alpha1.SecretReference{Namespace: ns, Name: name}
	}
}

func withList(list ...string) func(*v1alpha1.TerraformClusterIdentity) {
	return func(o *v1alpha1.TerraformClusterIdentity) {
		if o.Spec.AllowedNamespaces == nil {
			o.Spec.AllowedNamespaces = &v1alpha1.AllowedNamespaces{}
		}
		o.Spec.AllowedNamespaces.List = list
	}
}

func withoutList(o *v1alpha1.TerraformClusterIdentity) {
	if o.Spec.AllowedNamespaces != nil {
		o.Spec.AllowedNamespaces.List = nil
	}
}

func withSelector(sel *metav1.LabelSelector) func(*v1alpha1.TerraformClusterIdentity) {
	return func(o *v1alpha1.TerraformClusterIdentity) {
		if o.Spec.AllowedNamespaces == nil {
			o.Spec.AllowedNamespaces = &v1alpha1.AllowedNamespaces{}
		}
		o.Spec.AllowedNamespaces.Selector = sel
	}
}

func withRequiredKeys(keys ...string) func(*v1alpha1.TerraformClusterIdentity) {
	return func(o *v1alpha1.TerraformClusterIdentity) { o.Spec.RequiredKeys = keys }
}

func withoutAllowedNamespaces(o *v1alpha1.TerraformClusterIdentity) {
	o.Spec.AllowedNamespaces = nil
}

func withStatusNamespaces(nss ...string) func(*v1alpha1.TerraformClusterIdentity) {
	return func(o *v1alpha1.TerraformClusterIdentity) { o.Status.Namespaces = nss }
}

func withMetadataEdit(o *v1alpha1.TerraformClusterIdentity) {
	o.Labels = map[string]string{"team": "a"}
	o.Annotations = map[string]string{"example.com/note": canary, "example.com/owner": "platform"}
	o.ResourceVersion = "42"
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// bufferedContext returns a context whose logger writes to the test log and
// keeps what it wrote, so tests can check log lines (SPEC X1).
func bufferedContext(t *testing.T) (context.Context, ktesting.Buffer) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(10), ktesting.BufferLogs(true)))
	return klog.NewContext(context.Background(), logger), logger.GetSink().(ktesting.Underlier).GetBuffer()
}

// sarDenials reads captf_sar_denials_total from the registry /metrics
// serves. The counter has no labels, which component-base's testutil
// gatherer helpers do not read without the (unexported) metric itself, so
// the family is read directly. Tests that change it do not run in parallel.
func sarDenials(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, family := range families {
		if family.GetName() == "captf_sar_denials_total" {
			require.Len(t, family.GetMetric(), 1)
			return family.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("captf_sar_denials_total is not registered")
	return 0
}
