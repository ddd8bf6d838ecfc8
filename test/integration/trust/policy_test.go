package trust

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	v1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// fixture is a tenant namespace where alice may create, change and delete
// Secrets and Jobs (and Job status), as a namespace admin would.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	ns      string
	admin   kubernetes.Interface
	alice   kubernetes.Interface
	manager kubernetes.Interface
}

func setup(t *testing.T) *fixture {
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "tenant", nil)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "jobs/status"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
	}}
	if _, err := e.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: controlplane.Alice}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client := func(user string, groups ...string) kubernetes.Interface {
		c, err := kubernetes.NewForConfig(e.As(user, groups...))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	f := &fixture{t: t, ctx: ctx, ns: ns, admin: e.Kube, alice: client(controlplane.Alice),
		// The groups a ServiceAccount token carries; RBAC from manifests/rbac.
		manager: client(controlplane.Manager, "system:serviceaccounts", "system:serviceaccounts:captf-system")}
	f.waitPolicyActive()
	return f
}

// waitPolicyActive waits until the API server enforces the policy (it loads
// policies and bindings from informers) and alice's Role applies: a forged
// mirror is refused by the policy rather than created or refused by RBAC.
func (f *fixture) waitPolicyActive() {
	f.t.Helper()
	framework.Eventually(f.t, 60*time.Second, func() (bool, string) {
		s := secret(framework.Name("probe"), map[string]string{v1.LabelMirrored: "true"}, nil)
		_, err := f.alice.CoreV1().Secrets(f.ns).Create(f.ctx, s, metav1.CreateOptions{})
		if err == nil {
			_ = f.admin.CoreV1().Secrets(f.ns).Delete(f.ctx, s.Name, metav1.DeleteOptions{})
			return false, "a forged mirror was admitted: the policy is not active yet"
		}
		return isPolicyRefusal(err), err.Error()
	})
}

func secret(name string, labels, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		StringData: map[string]string{"TOKEN": "x"}}
}

// mirrorMeta are the labels and annotations of a mirror (SPEC M3).
func mirrorMeta(hash string) (labels, annotations map[string]string) {
	return map[string]string{v1.LabelMirrored: v1.LabelTrue, v1.LabelManaged: v1.LabelTrue},
		map[string]string{v1.AnnotationIdentity: "team-a", v1.AnnotationSourceHash: hash}
}

func job(name string, labels, annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "terraform", Image: "example.invalid/module:1"}},
			}},
		},
	}
}

// isPolicyRefusal reports whether err is a refusal by the B3 policy.
func isPolicyRefusal(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "captf-trust-boundary")
}

// requireRefused fails unless err is the policy's refusal naming key and who
// may set it.
func requireRefused(t *testing.T, err error, key string) {
	t.Helper()
	if err == nil {
		t.Fatalf("B3: the change of %s must be refused; it was admitted", key)
	}
	if !isPolicyRefusal(err) {
		t.Fatalf("B3: want the policy's refusal for %s, got %T %v", key, err, err)
	}
	for _, want := range []string{key, controlplane.Manager, "system:masters"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("B3: the refusal %q does not name %q", err.Error(), want)
		}
	}
}

// updateSecret reads the Secret, edits it and writes it back with client,
// again from a fresh read on a conflict.
func updateSecret(f *fixture, client kubernetes.Interface, name string, edit func(*corev1.Secret)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := f.admin.CoreV1().Secrets(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(s)
		_, err = client.CoreV1().Secrets(f.ns).Update(f.ctx, s, metav1.UpdateOptions{})
		return err
	})
}

// updateJob is updateSecret for Jobs, through /status when status is set.
// The Job controller writes status concurrently: conflicts are retried.
func updateJob(f *fixture, client kubernetes.Interface, name string, status bool, edit func(*batchv1.Job)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j, err := f.admin.BatchV1().Jobs(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(j)
		if status {
			_, err = client.BatchV1().Jobs(f.ns).UpdateStatus(f.ctx, j, metav1.UpdateOptions{})
		} else {
			_, err = client.BatchV1().Jobs(f.ns).Update(f.ctx, j, metav1.UpdateOptions{})
		}
		return err
	})
}

// TestTenantCannotForgeMirrors covers B3 on Secrets.
func TestTenantCannotForgeMirrors(t *testing.T) {
	f := setup(t)
	secrets := f.alice.CoreV1().Secrets(f.ns)

	// Creating a Secret that carries any one of the keys is refused.
	for key, s := range map[string]*corev1.Secret{
		v1.LabelMirrored:        secret("forged-mirrored", map[string]string{v1.LabelMirrored: "true"}, nil),
		v1.LabelManaged:         secret("forged-managed", map[string]string{v1.LabelManaged: "false"}, nil),
		v1.AnnotationIdentity:   secret("forged-identity", nil, map[string]string{v1.AnnotationIdentity: "team-a"}),
		v1.AnnotationSourceHash: secret("forged-hash", nil, map[string]string{v1.AnnotationSourceHash: "abc"}),
	} {
		t.Run("create with "+key, func(t *testing.T) {
			_, err := secrets.Create(f.ctx, s, metav1.CreateOptions{})
			requireRefused(t, err, key)
		})
	}

	// A Secret without the keys is the common case: admitted, and so are
	// edits that leave the keys alone.
	plain := secret("plain", map[string]string{"team": "a"}, map[string]string{"note": "x"})
	if _, err := secrets.Create(f.ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Secret without captf keys must be admitted: %v", err)
	}
	if err := updateSecret(f, f.alice, "plain", func(s *corev1.Secret) { s.Labels["env"] = "prod" }); err != nil {
		t.Fatalf("an unrelated label edit must be admitted: %v", err)
	}
	// Adding the mirror label to an existing Secret is refused.
	requireRefused(t, updateSecret(f, f.alice, "plain", func(s *corev1.Secret) { s.Labels[v1.LabelMirrored] = "true" }), v1.LabelMirrored)

	// The manager's own mirror: create and rotate pass (the engine does this
	// in every test; here directly, as its ServiceAccount user).
	labels, annotations := mirrorMeta("hash-1")
	if _, err := f.manager.CoreV1().Secrets(f.ns).Create(f.ctx, secret("captf-creds-team-a", labels, annotations), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the manager's mirror create must be admitted: %v", err)
	}
	// A rotation as the manager writes it (P3): a strategic merge patch of
	// its own fields, preconditioned on the version it read.
	stored, err := f.admin.CoreV1().Secrets(f.ns).Get(f.ctx, "captf-creds-team-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rotate := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{%q:"hash-2"}},"data":{"TOKEN":"cm90YXRlZA=="}}`,
		stored.ResourceVersion, v1.AnnotationSourceHash)
	if _, err := f.manager.CoreV1().Secrets(f.ns).Patch(f.ctx, "captf-creds-team-a", types.StrategicMergePatchType, []byte(rotate), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the manager's mirror update must be admitted: %v", err)
	}

	// The tenant may not strip or rewrite the marks of the mirror...
	for key, edit := range map[string]func(*corev1.Secret){
		v1.LabelMirrored:        func(s *corev1.Secret) { delete(s.Labels, v1.LabelMirrored) },
		v1.LabelManaged:         func(s *corev1.Secret) { s.Labels[v1.LabelManaged] = "false" },
		v1.AnnotationIdentity:   func(s *corev1.Secret) { s.Annotations[v1.AnnotationIdentity] = "team-b" },
		v1.AnnotationSourceHash: func(s *corev1.Secret) { s.Annotations[v1.AnnotationSourceHash] = "hash-2-stale" },
	} {
		t.Run("edit "+key+" on a mirror", func(t *testing.T) {
			requireRefused(t, updateSecret(f, f.alice, "captf-creds-team-a", edit), key)
		})
	}
	t.Run("remove every label of a mirror", func(t *testing.T) {
		err := updateSecret(f, f.alice, "captf-creds-team-a", func(s *corev1.Secret) { s.Labels = nil })
		if !isPolicyRefusal(err) {
			t.Fatalf("B3: want the policy's refusal, got %v", err)
		}
	})
	// ...but an edit that leaves them as they are is not the policy's
	// business (RBAC decides).
	if err := updateSecret(f, f.alice, "captf-creds-team-a", func(s *corev1.Secret) { s.Labels["team"] = "a" }); err != nil {
		t.Fatalf("an edit that keeps the captf keys must be admitted: %v", err)
	}
	got, err := f.admin.CoreV1().Secrets(f.ns).Get(f.ctx, "captf-creds-team-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1.LabelMirrored] != v1.LabelTrue || got.Annotations[v1.AnnotationSourceHash] != "hash-2" {
		t.Fatalf("the mirror's marks changed: labels %v, annotations %v", got.Labels, got.Annotations)
	}

	// system:masters may do anything (tests forge fixtures as the admin).
	if _, err := f.admin.CoreV1().Secrets(f.ns).Create(f.ctx, secret("admin-forged", labels, annotations), metav1.CreateOptions{}); err != nil {
		t.Fatalf("system:masters must be admitted: %v", err)
	}
}

// TestTenantCannotForgeJobs covers B3 on Jobs, and that the Job controller's
// own writes to a manager Job pass.
func TestTenantCannotForgeJobs(t *testing.T) {
	f := setup(t)
	jobs := f.alice.BatchV1().Jobs(f.ns)
	managed := map[string]string{v1.LabelManaged: v1.LabelTrue}
	annotations := func(hash string) map[string]string {
		return map[string]string{v1.AnnotationIdentity: "team-a", v1.AnnotationSourceHash: hash, v1.AnnotationJobAction: "apply"}
	}

	// A tenant Job posing as the manager's is refused.
	_, err := jobs.Create(f.ctx, job("forged", managed, nil), metav1.CreateOptions{})
	requireRefused(t, err, v1.LabelManaged)
	_, err = jobs.Create(f.ctx, job("forged-hash", nil, map[string]string{v1.AnnotationSourceHash: "current"}), metav1.CreateOptions{})
	requireRefused(t, err, v1.AnnotationSourceHash)
	// A plain Job is admitted.
	if _, err := jobs.Create(f.ctx, job("plain", map[string]string{"team": "a"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Job without captf keys must be admitted: %v", err)
	}

	// The manager's Job is admitted.
	name := "captf-apply"
	if _, err := f.manager.BatchV1().Jobs(f.ns).Create(f.ctx, job(name, managed, annotations("old")), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the manager's Job create must be admitted: %v", err)
	}

	// The Job controller (kube-controller-manager, not the manager's user)
	// writes the Job's status: its first sync sets status.startTime through
	// /status, which the policy also matches and must let through.
	framework.Eventually(t, 60*time.Second, func() (bool, string) {
		j, err := f.admin.BatchV1().Jobs(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return j.Status.StartTime != nil, fmt.Sprintf("status %+v", j.Status)
	})

	// Making a Job that started on old credentials look current (C5) is
	// refused, through the Job and through its status.
	bump := func(j *batchv1.Job) { j.Annotations[v1.AnnotationSourceHash] = "current" }
	requireRefused(t, updateJob(f, f.alice, name, false, bump), v1.AnnotationSourceHash)
	requireRefused(t, updateJob(f, f.alice, name, true, bump), v1.AnnotationSourceHash)
	requireRefused(t, updateJob(f, f.alice, name, false, func(j *batchv1.Job) { delete(j.Labels, v1.LabelManaged) }), v1.LabelManaged)
	// Marking a tenant's Job as the manager's is refused.
	requireRefused(t, updateJob(f, f.alice, "plain", false, func(j *batchv1.Job) { j.Labels[v1.LabelManaged] = v1.LabelTrue }), v1.LabelManaged)
	// An edit that keeps the keys (as the garbage collector's ownerReferences
	// patches do) is admitted.
	if err := updateJob(f, f.alice, name, false, func(j *batchv1.Job) { j.Labels["team"] = "a" }); err != nil {
		t.Fatalf("an edit that keeps the captf keys must be admitted: %v", err)
	}
	j, err := f.admin.BatchV1().Jobs(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Annotations[v1.AnnotationSourceHash] != "old" || j.Labels[v1.LabelManaged] != v1.LabelTrue {
		t.Fatalf("the Job's marks changed: labels %v, annotations %v", j.Labels, j.Annotations)
	}
}

// TestPolicyTypeChecks: the API server type-checks the policy's expressions
// against the Secret and Job schemas and reports problems only as warnings
// in status, which would otherwise go unnoticed (an expression that fails at
// run time refuses with failurePolicy Fail).
//
// Also the plan policy captf-plan-approval (SPEC O8), against the
// TerraformPlan CRD's schema.
func TestPolicyTypeChecks(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	for _, name := range []string{"captf-trust-boundary", "captf-plan-approval"} {
		framework.Eventually(t, 60*time.Second, func() (bool, string) {
			p, err := e.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return false, fmt.Sprintf("%s not type-checked yet: %+v", name, p.Status)
			}
			if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
				t.Fatalf("the policy %s's expressions have type-checking warnings: %+v", name, w)
			}
			return true, ""
		})
	}
}

// TestShippedManagerManifests applies the shipped Deployment and
// NetworkPolicy (SPEC B5, B6): the API server validates them (named ports,
// the downward-API GOMEMLIMIT), and the Deployment's pods pass the
// namespace's Pod Security level, so its ReplicaSet creates them.
func TestShippedManagerManifests(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	const ns = "captf-system"
	if err := e.Apply(ctx, "manifests/manager/deployment.yaml", "manifests/manager/network_policy.yaml"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.AppsV1().Deployments(ns).Delete(context.Background(), "captf-manager", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
		_ = e.Kube.NetworkingV1().NetworkPolicies(ns).Delete(context.Background(), "captf-manager", metav1.DeleteOptions{})
	})

	d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "captf-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	var memLimit *corev1.ResourceFieldSelector
	for _, env := range c.Env {
		if env.Name == "GOMEMLIMIT" && env.ValueFrom != nil {
			memLimit = env.ValueFrom.ResourceFieldRef
		}
	}
	if memLimit == nil || memLimit.Resource != "limits.memory" || memLimit.ContainerName != c.Name {
		t.Fatalf("B5: GOMEMLIMIT must come from the container's limits.memory, got %+v", memLimit)
	}
	if !slices.Contains(c.Args, "--require-source-consent=true") {
		t.Fatalf("B6: the shipped Deployment must require source consent, args %q", c.Args)
	}

	np, err := e.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "captf-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Fatalf("B5: the NetworkPolicy's podSelector %v does not select the manager pods %v", sel, d.Spec.Template.Labels)
	}
	// Every named port the policy admits is a port of the container.
	named := map[string]bool{}
	for _, p := range c.Ports {
		named[p.Name] = true
	}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port != nil && p.Port.Type == intstr.String && !named[p.Port.StrVal] {
				t.Fatalf("B5: the NetworkPolicy admits port %q, which the manager container does not name", p.Port.StrVal)
			}
		}
	}

	// The pods pass admission (Pod Security of captf-system among others):
	// the ReplicaSet creates them (they are never scheduled here).
	framework.Eventually(t, 90*time.Second, func() (bool, string) {
		pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set(d.Spec.Selector.MatchLabels).String()})
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) == 0 {
			events, _ := e.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
			var msgs []string
			for _, ev := range events.Items {
				msgs = append(msgs, ev.Message)
			}
			return false, "no manager pod created; FailedCreate events: " + strings.Join(msgs, " | ")
		}
		return true, ""
	})
}
