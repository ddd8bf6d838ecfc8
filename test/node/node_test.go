// Package node proves the local node (test/controlplane, Options.Node):
// Pods really run, under Pod Security "restricted", read a Secret through
// the environment and a 0440 file as a non-root user (SPEC J2), reach the
// API server in-cluster through the kubernetes Service, reach another pod
// through a Service, and the node leaves nothing behind when it stops.
//
// It runs with make test-node (CAPTF_NODE_TEST=1) and needs root and the
// node's packages and binaries; otherwise it skips, saying what is missing.
package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

const (
	captfImage = "captf.local/captf:dev"
	checkImage = "captf.local/nodecheck:dev"
	nonRoot    = 65532
)

func TestNode(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CAPTF_NODE_TEST") == "" {
		t.Skip("the node test runs with make test-node (CAPTF_NODE_TEST=1); not part of make test yet")
	}
	binDir := filepath.Join(root, "bin")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cp := controlplane.StartNodeForTest(ctx, t, binDir, true)

	start := time.Now()
	images := filepath.Join(binDir, "captf-images")
	for _, args := range [][]string{
		{"captf", "-repo", root, "-address", controlplane.ContainerdAddress},
		{"go", "-repo", root, "-pkg", "./test/node/nodecheck", "-name", checkImage, "-address", controlplane.ContainerdAddress},
	} {
		out, err := exec.CommandContext(ctx, images, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("captf-images %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("captf-images %s: %s", args[0], strings.TrimSpace(string(out)))
	}
	t.Logf("images built and imported in %s", time.Since(start).Round(time.Millisecond))

	kube, err := kubernetes.NewForConfig(cp.RestConfig(controlplane.Admin))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("JobReadsSecretRestricted", func(t *testing.T) { jobReadsSecret(ctx, t, kube) })
	t.Run("InClusterAPIThroughKubernetesService", func(t *testing.T) { inClusterAPI(ctx, t, kube) })
	t.Run("PodToPodThroughService", func(t *testing.T) { podToService(ctx, t, kube) })

	cp.StopAndCheck()
}

// restrictedNamespace creates a namespace enforcing Pod Security
// "restricted".
func restrictedNamespace(ctx context.Context, t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The ServiceAccount admission needs the namespace's default account.
	waitFor(ctx, t, "the default ServiceAccount in "+name, func() (bool, string) {
		_, err := kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// restricted is a pod spec that passes Pod Security "restricted": non-root
// user 65532 with fsGroup 65532, seccomp RuntimeDefault; each container
// drops every capability, no privilege escalation, read-only root.
func restricted(spec corev1.PodSpec) corev1.PodSpec {
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](nonRoot),
		RunAsGroup:     ptr.To[int64](nonRoot),
		FSGroup:        ptr.To[int64](nonRoot),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			cs[i].ImagePullPolicy = corev1.PullNever
			cs[i].SecurityContext = &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}
		}
	}
	return spec
}

func job(ns, name string, spec corev1.PodSpec) *batchv1.Job {
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{Spec: restricted(spec)},
		},
	}
}

// SPEC J2: the Job's container reads the credential from its environment
// (envFrom) and from a 0440 file as the non-root user 65532 with fsGroup
// 65532, under Pod Security "restricted"; the init container runs the captf
// image (the one the Dockerfile describes).
func jobReadsSecret(ctx context.Context, t *testing.T, kube kubernetes.Interface) {
	const ns = "node-secret"
	restrictedNamespace(ctx, t, kube, ns)
	value := "not-a-real-credential-" + fmt.Sprint(time.Now().UnixNano())
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"TOKEN": value},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(value))
	start := time.Now()
	j := job(ns, "read-secret", corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		InitContainers:               []corev1.Container{{Name: "captf", Image: captfImage, Args: []string{"version"}}},
		Containers: []corev1.Container{{
			Name:         "check",
			Image:        checkImage,
			Args:         []string{"secret", "TOKEN", "/creds/TOKEN", hex.EncodeToString(sum[:])},
			EnvFrom:      []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "creds", MountPath: "/creds", ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o440)},
		}}},
	})
	logs := runJob(ctx, t, kube, j)
	t.Logf("Job Complete %s after it was created", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{"uid=65532 gid=65532", "environment: TOKEN matches", "file: /creds/TOKEN (mode -r--r-----) matches", "root file system: read-only", "ok"} {
		if !strings.Contains(logs["check"], want) {
			t.Errorf("check's log lacks %q:\n%s", want, logs["check"])
		}
	}
	if !strings.Contains(logs["captf"], "captf dev") {
		t.Errorf("the captf init container's log lacks its version:\n%s", logs["captf"])
	}
	for c, l := range logs {
		if strings.Contains(l, value) {
			t.Errorf("container %s logged the Secret's value (SPEC X1)", c)
		}
	}
}

// A pod reaches the API server the way the manager, the webhook's callers
// and Terraform's kubernetes backend do in a cluster: in-cluster config,
// the kubernetes Service (kube-proxy translates it to the API server on the
// bridge's address), the ServiceAccount's token, RBAC.
func inClusterAPI(ctx context.Context, t *testing.T, kube kubernetes.Interface) {
	const ns = "node-incluster"
	restrictedNamespace(ctx, t, kube, ns)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "checker"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "list-pods"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "checker-lists-pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "list-pods"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "checker", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	logs := runJob(ctx, t, kube, job(ns, "in-cluster", corev1.PodSpec{
		ServiceAccountName: "checker",
		Containers:         []corev1.Container{{Name: "check", Image: checkImage, Args: []string{"incluster", ns}}},
	}))
	t.Logf("Job Complete %s after it was created", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{"API server: https://10.0.0.1:443", "version: v", "pods in " + ns + ": 1", "ok"} {
		if !strings.Contains(logs["check"], want) {
			t.Errorf("check's log lacks %q:\n%s", want, logs["check"])
		}
	}
}

// A pod reaches another pod through a Service (what the fake cloud and the
// webhook need): kube-proxy's translation, the bridge's forwarding between
// its own ports, and masquerading so the reply finds its way back.
func podToService(ctx context.Context, t *testing.T, kube kubernetes.Interface) {
	const ns = "node-service"
	restrictedNamespace(ctx, t, kube, ns)
	labels := map[string]string{"app": "nodecheck-server"}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Labels: labels},
		Spec: restricted(corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "serve", Image: checkImage, Args: []string{"serve", "8080"},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}},
		}),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	logs := runJob(ctx, t, kube, job(ns, "client", corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []corev1.Container{{Name: "check", Image: checkImage, Args: []string{"get", "http://" + svc.Spec.ClusterIP + "/"}}},
	}))
	t.Logf("Job Complete %s after it was created", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(logs["check"], "ok") {
		t.Errorf("check's log:\n%s", logs["check"])
	}
}

// runJob creates j, waits until it is Complete (failing on Failed), and
// returns its pod's logs by container, read through the API server from the
// kubelet.
func runJob(ctx context.Context, t *testing.T, kube kubernetes.Interface, j *batchv1.Job) map[string]string {
	t.Helper()
	if _, err := kube.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var final batchv1.JobConditionType
	waitFor(ctx, t, "Job "+j.Namespace+"/"+j.Name+" to finish", func() (bool, string) {
		got, err := kube.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				final = c.Type
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %+v", got.Status)
	})
	logs := map[string]string{}
	pods, err := kube.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + j.Name})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the Job's pod: %v (%d pods)", err, len(pods.Items))
	}
	pod := pods.Items[0]
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		b, err := kube.CoreV1().Pods(j.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
		if err != nil {
			t.Errorf("logs of %s/%s: %v", pod.Name, c.Name, err)
		}
		logs[c.Name] = string(b)
	}
	if final != batchv1.JobComplete {
		events, _ := kube.CoreV1().Events(j.Namespace).List(ctx, metav1.ListOptions{})
		var ev strings.Builder
		for _, e := range events.Items {
			fmt.Fprintf(&ev, "  %s %s: %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
		}
		t.Fatalf("Job %s/%s %s; pod status %+v\nlogs %v\nevents:\n%s", j.Namespace, j.Name, final, pod.Status, logs, ev.String())
	}
	return logs
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: %s", what, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
