package engine

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// restricted labels a namespace so that Pod Security admission enforces the
// "restricted" profile on its pods.
var restricted = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
}

// dryRunPod creates, with dryRun=All, a Pod from the pod template of the Job
// the manager created: what the Job controller would create, through the
// same admission (Pod Security included), without storing anything.
func dryRunPod(f *framework.Fixture, j batchv1.Job) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: "dry-run", Labels: j.Spec.Template.Labels},
		Spec:       *j.Spec.Template.Spec.DeepCopy(),
	}
	_, err := f.Env.Kube.CoreV1().Pods(j.Namespace).Create(f.Ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// TestJobPodPodSecurityRestricted proves T6 on the real API server: the pod
// of a Job the manager created is admitted in a namespace enforcing Pod
// Security "restricted", and an override that breaks "restricted" is refused
// there, so the admission is the defaults' doing. The second object also
// carries variables and a lock wait, which reach the stored Job (T3, T8).
func TestJobPodPodSecurityRestricted(t *testing.T) {
	f := setup(t)
	nsDefaults := f.Env.CreateNamespace(t, "restricted", restricted)
	nsOverride := f.Env.CreateNamespace(t, "restricted", restricted)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(nsDefaults, nsOverride))

	f.Cluster(nsDefaults, "defaults", id)
	j := f.WaitJob(nsDefaults, v1alpha1.JobActionApply)
	if err := dryRunPod(f, j); err != nil {
		t.Fatalf("T6: the Job's pod must be admitted under Pod Security restricted: %v", err)
	}

	c := &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsOverride, Name: "root", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: &v1alpha1.IdentityReference{Name: id},
			Source:      v1alpha1.SourceSpec{Image: "example.com/module:1"},
			Jobs: v1alpha1.JobsSpec{
				PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)},
				LockTimeoutSeconds: ptr.To[int64](120),
			},
			Variables: &runtime.RawExtension{Raw: []byte(`{"region": "eu-west-1", "zones": ["a", "b"]}`)},
		},
	}
	if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(nsOverride).Create(f.Ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	j = f.WaitJob(nsOverride, v1alpha1.JobActionApply)
	main := j.Spec.Template.Spec.Containers[0]
	if got := ptr.Deref(j.Spec.Template.Spec.SecurityContext.RunAsUser, -1); got != 0 {
		t.Errorf("T6: the override runAsUser 0 must reach the pod, got %d", got)
	}
	if got := ptr.Deref(j.Spec.Template.Spec.SecurityContext.RunAsNonRoot, false); !got {
		t.Errorf("T6: unset override fields keep the defaults: runAsNonRoot %v", got)
	}
	if got := strings.Join(main.Command, " "); !strings.Contains(got, " --lock-timeout=120s ") {
		t.Errorf("T8: command %v", main.Command)
	}
	if len(main.Env) < 4 || main.Env[3].Name != "CAPTF_VARIABLES" || main.Env[3].Value != `{"region":"eu-west-1","zones":["a","b"]}` {
		t.Errorf("T3: env %+v", main.Env)
	}
	err := dryRunPod(f, j)
	if err == nil {
		t.Fatal("T6: a pod running as root must be refused under Pod Security restricted: the namespace does not enforce it")
	}
	if !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) || !strings.Contains(err.Error(), "runAsUser=0") {
		t.Fatalf("T6: want a Pod Security refusal naming runAsUser=0, got: %v", err)
	}
}
