// Package e2e runs captf end to end on a real node (issue 12): the manager
// deployed in-cluster from manifests/ with kubectl apply -k (two replicas,
// leader election, the webhook reached through its Service with a
// self-signed certificate), and a TerraformCluster whose Jobs run OpenTofu
// with the test module (test/e2e/module) against the fake cloud
// (test/fakecloud), which accepts only the identity's current credential.
//
// The lifecycle, in one test because each step needs the previous one's
// state: the apply Job uses the credential through the environment and the
// file (J2); a rotation while a Job runs changes the Job's file and not its
// environment (R3), the next Job gets the new key, and the identity reports
// RotationComplete (C5); a revocation makes the deletion's destroy wait
// (V1, V2); allowed again, the destroy deletes the fake-cloud resource with
// the state it finds in the namespace (T2), the state Secret goes, and the
// identity can be deleted (A4). The tenant namespace enforces Pod Security
// "restricted" (T6). The webhook refuses alice through the in-cluster path
// (A2).
//
// TestCAPIClusterAndMachine (capi_test.go) runs Cluster API's core manager
// beside the manager on a node of its own (SPEC K12); TestCAPITemplates
// (capi_md_test.go, capi_clusterclass_test.go) does the same with a
// MachineDeployment and a ClusterClass (SPEC K9). TestClusterctlMoveOnNode
// (capi_move_test.go) installs captf with clusterctl init and moves a
// provisioned cluster to a second management cluster and back with
// clusterctl move (SPEC K10, K11, K12).
//
// They run with make e2e (CAPTF_E2E=1, root); otherwise they skip.
package e2e

import (
	"context"
	"encoding/json"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

const (
	moduleImage = "captf.local/fakecloud-module:dev"
	// upstreamModuleImage is the same module laid out as upstream's
	// images are (SPEC O10): /captf/module and /captf/runtime.
	upstreamModuleImage = "captf.local/fakecloud-module-upstream:dev"
	identity            = "fakecloud"
	tenant              = "e2e-tenant"
	clusterName         = "demo"
	// The credential before and after the rotation: made-up values.
	tokenA = "e2e-fakecloud-token-A-31c7"
	tokenB = "e2e-fakecloud-token-B-9e04"
)

// env is what the steps share.
type env struct {
	root   string
	cp     *controlplane.ControlPlane
	kube   kubernetes.Interface
	captf  versioned.Interface
	leader string
	cloud  cloud
	// dyn reads Cluster API's objects; capi is its core manager (nil
	// unless the test runs it).
	dyn  dynamic.Interface
	capi *controlplane.CAPIManager
	// forbidden are values, beside the credentials, that no log, event or
	// Job may hold (X1: bootstrap data, SPEC K5).
	forbidden []string
	// digests are the images' manifest digests, by name, as
	// hack/build-e2e-images.sh reports them.
	digests map[string]string
}

func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	e, cp := start(ctx, t, false)
	defer func() {
		if t.Failed() && !cp.Stopped() {
			e.dumpState(t)
		}
	}()

	e.runSteps(ctx, t, cp, []step{
		{"WebhookRefusesAliceThroughItsService", e.webhookRefusesAlice},
		{"LeaderFailover", e.leaderFailover},
		{"Lifecycle", e.lifecycle},
		{"NoCredentialInLogsOrEvents", e.noCredentialInLogs},
	})
}

// step is one subtest of an end-to-end test.
type step struct {
	name string
	run  func(context.Context, *testing.T)
}

// runSteps runs steps in order as subtests, each timed, and stops at the
// first that fails (the later ones build on it); then it dumps the
// cluster's state if the test failed and stops the control plane.
func (e *env) runSteps(ctx context.Context, t *testing.T, cp *controlplane.NodeForTest, steps []step) {
	t.Helper()
	for _, s := range steps {
		start := time.Now()
		if !t.Run(s.name, func(t *testing.T) { s.run(ctx, t) }) {
			break
		}
		t.Logf("%s took %s", s.name, time.Since(start).Round(time.Millisecond))
	}
	if t.Failed() {
		e.dumpState(t)
	}
	e.stop(cp)
}

// start brings up what each end-to-end test runs on: a control plane
// with a node, the images built and imported, with capi Cluster API's CRDs
// and core manager (as a local process, SPEC K12; capiArgs are its extra
// flags, such as feature gates), then captf's manager
// deployed from manifests/ and the fake cloud. Cluster API comes first:
// captf's manager discovers it once, at start (docs/design.md, "The
// Cluster API contract"). It skips unless CAPTF_E2E is set.
func start(ctx context.Context, t *testing.T, capi bool, capiArgs ...string) (*env, *controlplane.NodeForTest) {
	t.Helper()
	e, cp := startNode(ctx, t)
	var err error
	if capi {
		begin := time.Now()
		if e.capi, err = cp.StartCAPI(ctx, controlplane.CAPIOptions{BinDir: filepath.Join(e.root, "bin"), Args: capiArgs}); err != nil {
			t.Fatalf("starting Cluster API's core manager: %v", err)
		}
		t.Cleanup(e.capi.Stop)
		t.Logf("Cluster API's CRDs applied and its core manager ready in %s (log %s)", time.Since(begin).Round(time.Millisecond), e.capi.LogPath)
	}

	begin := time.Now()
	e.deployManager(ctx, t)
	e.deployFakeCloud(ctx, t)
	t.Logf("manager and fake cloud deployed in %s", time.Since(begin).Round(time.Millisecond))
	return e, cp
}

// startNode brings up the control plane with a node, builds and imports
// the images, and gives the test its clients. It skips unless CAPTF_E2E
// is set.
func startNode(ctx context.Context, t *testing.T) (*env, *controlplane.NodeForTest) {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CAPTF_E2E") == "" {
		t.Skip("the end-to-end test runs with make e2e (CAPTF_E2E=1, root)")
	}
	// make e2e installs and builds the node's prerequisites first: a
	// missing one is a failure, not a skip.
	cp := controlplane.StartNodeForTest(ctx, t, filepath.Join(root, "bin"), false)

	begin := time.Now()
	out, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-e2e-images.sh"), controlplane.ContainerdAddress).CombinedOutput()
	if err != nil {
		t.Fatalf("hack/build-e2e-images.sh: %v\n%s", err, out)
	}
	t.Logf("images built and imported in %s:\n%s", time.Since(begin).Round(time.Millisecond), strings.TrimSpace(string(out)))

	e := &env{root: root, cp: cp.ControlPlane, digests: imageDigests(string(out))}
	e.cloud = cloud{e: e}
	if e.kube, err = kubernetes.NewForConfig(cp.RestConfig(controlplane.Admin)); err != nil {
		t.Fatal(err)
	}
	if e.captf, err = versioned.NewForConfig(cp.RestConfig(controlplane.Admin)); err != nil {
		t.Fatal(err)
	}
	if e.dyn, err = dynamic.NewForConfig(cp.RestConfig(controlplane.Admin)); err != nil {
		t.Fatal(err)
	}
	return e, cp
}

// stop stops Cluster API's manager, if any, then the control plane and
// the node, and checks the node left nothing behind.
func (e *env) stop(cp *controlplane.NodeForTest) {
	if e.capi != nil {
		e.capi.Stop()
	}
	cp.StopAndCheck()
}

// webhookRefusesAlice: alice may create identities (RBAC) but may not read
// the fake cloud's Secret, so the in-cluster webhook, called by the API
// server through the Service captf-webhook, refuses her identity (A2),
// naming her and the Secret.
func (e *env) webhookRefusesAlice(ctx context.Context, t *testing.T) {
	_, err := e.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-identity-editor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1alpha1.SchemeGroupVersion.Group}, Resources: []string{"terraformclusteridentities"},
			Verbs: []string{"get", "list", "create", "update", "delete"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-alice-identity-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-identity-editor"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: controlplane.Alice}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := versioned.NewForConfig(e.cp.RestConfig(controlplane.Alice))
	if err != nil {
		t.Fatal(err)
	}
	id := &v1alpha1.TerraformClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-steals"},
		Spec: v1alpha1.TerraformClusterIdentitySpec{
			SecretRef:         v1alpha1.SecretReference{Name: cloudSecret, Namespace: cloudNamespace},
			AllowedNamespaces: &v1alpha1.AllowedNamespaces{List: []string{"alice-ns"}},
		},
	}
	var last error
	e.waitFor(ctx, t, time.Minute, "the webhook to refuse alice (RBAC lets her create identities)", func() (bool, string) {
		_, last = alice.InfrastructureV1alpha1().TerraformClusterIdentities().Create(ctx, id, metav1.CreateOptions{})
		if last == nil {
			t.Fatalf("alice created an identity for %s/%s, which she may not read (SPEC A2)", cloudNamespace, cloudSecret)
		}
		// Until RBAC's cache sees the binding, the refusal is RBAC's.
		return strings.Contains(last.Error(), "admission webhook"), last.Error()
	})
	msg := last.Error()
	for _, want := range []string{`"terraformclusteridentities.infrastructure.cluster.x-k8s.io"`, "denied the request", controlplane.Alice, cloudNamespace + "/" + cloudSecret} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, tokenA) || strings.Contains(msg, "sample-fakecloud-token") {
		t.Errorf("the refusal contains the credential (SPEC X1): %q", msg)
	}
	t.Logf("refused through the Service: %s", msg)
}

// leaderFailover: the leader's pod is deleted (SIGTERM: it drains and
// releases the Lease); the other replica takes the Lease, and the lifecycle
// that follows runs under it.
func (e *env) leaderFailover(ctx context.Context, t *testing.T) {
	old := e.leader
	start := time.Now()
	if err := e.kube.CoreV1().Pods(systemNamespace).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitLeader(ctx, t, "another replica holding the Lease", old)
	t.Logf("the Lease moved from %s to %s in %s", old, e.leader, time.Since(start).Round(time.Millisecond))
	e.waitFor(ctx, t, 3*time.Minute, "the Deployment back to 2 available replicas", func() (bool, string) {
		d, err := e.kube.AppsV1().Deployments(systemNamespace).Get(ctx, managerName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas == 2 && len(e.managerPods(ctx, t)) == 2, e.podSummary(ctx, systemNamespace)
	})
}

// noCredentialInLogs (X1): neither credential value appears in the
// manager pods' logs or in any event (the Jobs' logs are scanned in the
// lifecycle, before the Jobs go with their cluster).
func (e *env) noCredentialInLogs(ctx context.Context, t *testing.T) {
	n := e.scanPodLogs(ctx, t, systemNamespace)
	events, err := e.kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		e.scan(t, "event "+ev.Namespace+"/"+ev.Name, []byte(ev.Message))
	}
	if n == 0 || len(events.Items) == 0 {
		t.Fatalf("X1: nothing to scan (%d bytes of logs, %d events)", n, len(events.Items))
	}
	t.Logf("X1: scanned %d bytes of the manager's logs and %d events", n, len(events.Items))
}

// scanPodLogs scans every container log of ns for the credentials and
// returns the bytes scanned.
func (e *env) scanPodLogs(ctx context.Context, t *testing.T, ns string) int {
	t.Helper()
	pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			b, err := e.kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				t.Errorf("log of %s/%s %s: %v", ns, p.Name, c.Name, err)
				continue
			}
			n += len(b)
			e.scan(t, "the log of "+ns+"/"+p.Name+" "+c.Name, b)
		}
	}
	return n
}

// scan fails the test when b holds a credential value or one of
// e.forbidden (X1).
func (e *env) scan(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, v := range append([]string{tokenA, tokenB}, e.forbidden...) {
		if strings.Contains(string(b), v) {
			t.Errorf("X1: %s contains a credential value or bootstrap data", what)
		}
	}
}

// lifecycle: see the package comment.
func (e *env) lifecycle(ctx context.Context, t *testing.T) {
	e.createTenant(ctx, t)
	e.setToken(ctx, t, tokenA)
	// The fake cloud expects tokenA once the kubelet refreshed its volume;
	// its generation counts the values it expected before (the manifest's).
	var genA int
	e.waitFor(ctx, t, 2*time.Minute, "the fake cloud to accept tokenA", func() (bool, string) {
		var who struct {
			Generation int `json:"generation"`
		}
		err := e.cloud.get(ctx, "/whoami", tokenA, &who)
		genA = who.Generation
		return err == nil, fmt.Sprint(err)
	})
	genB := genA + 1

	e.createIdentity(ctx, t)

	// The cluster: its first apply waits in the Job for a rotation (the
	// module's rotation probe), so R3 is seen from inside a running Job.
	before := lastSeq(e.cloud.seen(ctx, t))
	cluster := &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: tenant, Annotations: map[string]string{v1alpha1.AnnotationStandalone: v1alpha1.LabelTrue}},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: &v1alpha1.IdentityReference{Name: identity},
			Source:      v1alpha1.SourceSpec{Image: moduleImage},
			Variables:   variables(t, map[string]any{"name": clusterName, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "rotation_wait_seconds": 300}),
		},
	}
	cluster, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Create(ctx, cluster, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the cluster: %v", err)
	}
	resourceID := moduleID(tenant, clusterName)
	put := match{after: before, method: "PUT", path: "/resources/" + resourceID, source: "env"}
	get := match{after: before, method: "GET", path: "/resources/" + resourceID, source: "file"}

	// J2: the running apply Job created the resource with the credential
	// from its environment and read it back with the file.
	start := time.Now()
	job1 := e.waitJob(ctx, t, cluster.UID, v1alpha1.JobActionApply, 1)
	e.waitFor(ctx, t, 5*time.Minute, "the apply Job's create (env) and check (file) in the fake cloud", func() (bool, string) {
		seen := e.cloud.seen(ctx, t)
		if j := e.job(ctx, t, job1.Name); jobFinished(j) {
			t.Fatalf("the apply Job %s finished before the rotation: %s; pods: %s", j.Name, jobState(j), e.podSummary(ctx, tenant))
		}
		return len(put.filter(seen)) == 1 && len(get.filter(seen)) == 1, describe(seen) + "\npods: " + e.podSummary(ctx, tenant)
	})
	t.Logf("J2: the Job's first requests reached the fake cloud %s after the cluster was created", time.Since(start).Round(time.Millisecond))
	seen := e.cloud.seen(ctx, t)
	for _, r := range append(put.filter(seen), get.filter(seen)...) {
		if r.Credential != "current" || r.Generation != genA || !r.Matched {
			t.Errorf("J2: %s %s with the credential from %s: %s generation %d, want current generation %d", r.Method, r.Path, r.Source, r.Credential, r.Generation, genA)
		}
	}
	e.checkRestrictedJob(ctx, t, job1)

	// A4 through the Service: the identity is in use.
	if err := e.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(ctx, identity, metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), "admission webhook") {
		t.Fatalf("A4: deleting the identity while %s/%s uses it: %v, want the webhook's refusal", tenant, clusterName, err)
	}

	// R3: rotate while the Job runs. The Job's file follows the mirror,
	// its environment does not; the module's probe asks the fake cloud once
	// with each when the file has changed.
	afterCreate := lastSeq(seen)
	mirror := e.mirror(ctx, t)
	oldHash := mirror.Annotations[v1alpha1.AnnotationSourceHash]
	e.setToken(ctx, t, tokenB)
	e.waitFor(ctx, t, 2*time.Minute, "RotationComplete=False/JobsOnPreviousCredentials while the Job runs", func() (bool, string) {
		c := e.identityCondition(ctx, t, v1alpha1.ConditionRotationComplete)
		if c == nil {
			return false, "no condition"
		}
		if j := e.job(ctx, t, job1.Name); jobFinished(j) {
			t.Logf("the Job finished before RotationComplete was seen False; not checked")
			return true, ""
		}
		return c.Status == metav1.ConditionFalse && c.Reason == string(v1alpha1.ReasonJobsOnPreviousCredentials), c.Reason + ": " + c.Message
	})
	start = time.Now()
	done := e.waitJobDone(ctx, t, job1.Name, 6*time.Minute)
	if !jobSucceeded(done) {
		t.Fatalf("the apply Job %s: %s, want Complete; pods: %s", done.Name, jobState(done), e.podSummary(ctx, tenant))
	}
	t.Logf("R3: the running Job saw the rotation and completed %s after the Secret changed", time.Since(start).Round(time.Millisecond))
	seen = e.cloud.seen(ctx, t)
	fileWho := match{after: afterCreate, method: "GET", path: "/whoami", source: "file"}.filter(seen)
	envWho := match{after: afterCreate, method: "GET", path: "/whoami", source: "env"}.filter(seen)
	if len(fileWho) == 0 || len(envWho) != 1 {
		t.Fatalf("R3: want the probe's whoami with the file (accepted) and one with the environment; seen:%s", describe(seen))
	}
	if r := fileWho[len(fileWho)-1]; r.Credential != "current" || r.Generation != genB || r.Status != 200 {
		t.Errorf("R3: the running Job's file after the rotation: %s generation %d status %d, want current generation %d status 200", r.Credential, r.Generation, r.Status, genB)
	}
	if r := envWho[0]; r.Credential != "previous" || r.Generation != genA || r.Status != 401 {
		t.Errorf("R3: the running Job's environment after the rotation: %s generation %d status %d, want previous generation %d status 401 (a running Job keeps its environment)", r.Credential, r.Generation, r.Status, genA)
	}
	if h := e.mirror(ctx, t).Annotations[v1alpha1.AnnotationSourceHash]; h == oldHash {
		t.Errorf("the mirror still carries the old hash after the rotation")
	}

	e.waitClusterCondition(ctx, t, v1alpha1.ConditionReady, metav1.ConditionTrue, "", 2*time.Minute)
	e.waitIdentityCondition(ctx, t, v1alpha1.ConditionRotationComplete, metav1.ConditionTrue, v1alpha1.ReasonRotationComplete, 2*time.Minute)
	e.checkOutputs(ctx, t, resourceID)
	e.checkPinned(ctx, t, clusterName, moduleImage)
	stateSecret := "tfstate-default-" + jobs.StateSuffix("TerraformCluster", clusterName)
	if _, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, stateSecret, metav1.GetOptions{}); err != nil {
		t.Fatalf("T2: the state Secret %s/%s after the apply: %v", tenant, stateSecret, err)
	}
	if res := e.cloud.resources(ctx, t, tokenB); len(res) != 1 || res[0].ID != resourceID {
		t.Fatalf("the fake cloud holds %+v, want the one resource %s", res, resourceID)
	}

	// The next Job uses the new key, both ways.
	afterRotation := lastSeq(e.cloud.seen(ctx, t))
	e.editCluster(ctx, t, func(c *v1alpha1.TerraformCluster) {
		// The rotation probe stays (its input unchanged): dropping it would
		// delete a resource, which the cluster's destructive guard (O8)
		// holds for approval.
		c.Spec.Variables = variables(t, map[string]any{"name": clusterName, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "credential_check": "after-rotation", "rotation_wait_seconds": 300})
	})
	job2 := e.waitJob(ctx, t, cluster.UID, v1alpha1.JobActionApply, 2)
	if done := e.waitJobDone(ctx, t, job2.Name, 5*time.Minute); !jobSucceeded(done) {
		t.Fatalf("the second apply Job %s: %s; pods: %s", done.Name, jobState(done), e.podSummary(ctx, tenant))
	}
	seen = e.cloud.seen(ctx, t)
	for _, source := range []string{"env", "file"} {
		who := match{after: afterRotation, method: "GET", path: "/whoami", source: source}.filter(seen)
		if len(who) != 1 || who[0].Credential != "current" || who[0].Generation != genB {
			t.Errorf("the Job after the rotation, credential from %s: want one whoami with the current generation %d; seen:%s", source, genB, describe(seen))
		}
	}
	e.waitClusterCondition(ctx, t, v1alpha1.ConditionReady, metav1.ConditionTrue, "", 2*time.Minute)
	if n := e.scanPodLogs(ctx, t, tenant); n == 0 {
		t.Errorf("X1: the Jobs' pods in %s logged nothing to scan", tenant)
	}

	// V1: revoke the tenant (narrowing needs no SubjectAccessReview, A3).
	// An empty list matches no namespace (N1); Go's omitempty would drop
	// it, so it goes as a merge patch.
	if _, err := e.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Patch(ctx, identity, types.MergePatchType,
		[]byte(`{"spec":{"allowedNamespaces":{"list":[]}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("revoking %s: %v", tenant, err)
	}
	e.waitFor(ctx, t, 2*time.Minute, "V1: the mirror removed", func() (bool, string) {
		_, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, credentials.MirrorName(identity), metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	// V2: the deletion's destroy waits; no destroy Job, the resource stays.
	if err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Delete(ctx, clusterName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitClusterCondition(ctx, t, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed, 2*time.Minute)
	if j := e.jobsOf(ctx, t, cluster.UID, v1alpha1.JobActionDestroy); len(j) != 0 {
		t.Fatalf("V2: a destroy Job %s started for a disallowed identity", j[0].Name)
	}
	if res := e.cloud.resources(ctx, t, tokenB); len(res) != 1 {
		t.Fatalf("V2: the fake cloud holds %+v while the destroy waits, want the resource", res)
	}

	// Allowed again: the destroy runs with the state it finds and deletes
	// the resource; the state Secret and the mirror go, then the cluster.
	beforeDestroy := lastSeq(e.cloud.seen(ctx, t))
	start = time.Now()
	e.editIdentity(ctx, t, func(id *v1alpha1.TerraformClusterIdentity) {
		id.Spec.AllowedNamespaces = &v1alpha1.AllowedNamespaces{List: []string{tenant}}
	})
	e.waitFor(ctx, t, 5*time.Minute, "the cluster gone after its destroy", func() (bool, string) {
		_, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, clusterName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("%v; pods: %s", err, e.podSummary(ctx, tenant))
	})
	t.Logf("re-allowed: the destroy ran and the cluster was gone %s later", time.Since(start).Round(time.Millisecond))
	seen = e.cloud.seen(ctx, t)
	dels := match{after: beforeDestroy, method: "DELETE", path: "/resources/" + resourceID, source: "file"}.filter(seen)
	if len(dels) != 1 || dels[0].Status != 204 || dels[0].Credential != "current" {
		t.Errorf("the destroy: want one DELETE of %s with the current credential from the file, answered 204; seen:%s", resourceID, describe(seen))
	}
	if res := e.cloud.resources(ctx, t, tokenB); len(res) != 0 {
		t.Errorf("the fake cloud still holds %+v after the destroy", res)
	}
	if _, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, stateSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("T2: the state Secret %s/%s after the destroy: %v, want NotFound", tenant, stateSecret, err)
	}
	e.waitFor(ctx, t, 2*time.Minute, "V3: the mirror removed after the destroy", func() (bool, string) {
		_, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, credentials.MirrorName(identity), metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	// O10: the same module in an image laid out as upstream's
	// (/captf/module, /captf/runtime, no terraform on PATH) applies and
	// destroys unchanged.
	e.upstreamLayout(ctx, t)

	// O1: a run that fails is explained without its pod; O2: an image
	// that cannot be pulled is reported within a minute.
	e.failedRun(ctx, t)
	e.imagePullFailed(ctx, t)
	// O2: a pod deleted mid-run is retried at once.
	e.podDeletedMidRun(ctx, t)
	// O9: a variable from a labelled ConfigMap, re-applied on its change.
	e.variablesFromConfigMap(ctx, t)
	e.driftOnNode(ctx, t) // O7 on the real node (drift_test.go)
	// O8: a Manual cluster's change waits for its approved plan
	// (plan_test.go); the destructive guard is proved by the O9 step.
	e.manualPlanOnNode(ctx, t)

	// A4: no user, no mirror: the identity can be deleted.
	e.waitFor(ctx, t, 2*time.Minute, "the identity deleted (A4 lets it go once unused)", func() (bool, string) {
		err := e.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(ctx, identity, metav1.DeleteOptions{})
		return err == nil || apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// createTenant creates the tenant namespace. It enforces Pod Security
// "restricted": every Job must pass (T6).
func (e *env) createTenant(ctx context.Context, t *testing.T) {
	t.Helper()
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: tenant,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// createIdentity creates the identity of the fake cloud's Secret allowing
// the tenant (the admin may read the Secret: the webhook admits it).
func (e *env) createIdentity(ctx context.Context, t *testing.T) {
	t.Helper()
	_, err := e.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(ctx, &v1alpha1.TerraformClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: identity},
		Spec: v1alpha1.TerraformClusterIdentitySpec{
			SecretRef:         v1alpha1.SecretReference{Name: cloudSecret, Namespace: cloudNamespace},
			AllowedNamespaces: &v1alpha1.AllowedNamespaces{List: []string{tenant}},
			RequiredKeys:      []string{tokenKey},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the identity: %v", err)
	}
}

// upstreamLayout runs a cluster from the module image laid out as
// upstream's (SPEC O10): Ready after its apply, its resource in the fake
// cloud, and gone with the resource after its deletion.
func (e *env) upstreamLayout(ctx context.Context, t *testing.T) {
	const name = "demo-upstream"
	e.createTenantCluster(ctx, t, "O10", name, upstreamModuleImage, map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint})
	id := moduleID(tenant, name)
	e.waitTenantClusterReady(ctx, t, name, "O10: the upstream-layout cluster Ready")
	found := false
	for _, r := range e.cloud.resources(ctx, t, tokenB) {
		found = found || r.ID == id
	}
	if !found {
		t.Errorf("O10: the fake cloud holds no resource %s after the upstream-layout apply", id)
	}
	e.deleteTenantCluster(ctx, t, name)
}

// checkRestrictedJob: the Job's pod was admitted in a namespace enforcing
// "restricted" and runs as the T6 defaults say.
func (e *env) checkRestrictedJob(ctx context.Context, t *testing.T, job batchv1.Job) {
	t.Helper()
	pods, err := e.kube.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the pod of %s: %v (%d pods)", job.Name, err, len(pods.Items))
	}
	p := pods.Items[0]
	sc := p.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.FSGroup == nil || *sc.FSGroup != jobs.CredentialsGroup {
		t.Errorf("T6: the pod's security context %+v", sc)
	}
	if p.Spec.ServiceAccountName != "captf-runner" {
		t.Errorf("T1: the pod runs as %q, want captf-runner", p.Spec.ServiceAccountName)
	}
}

// setToken writes the fake cloud's Secret, the identity's source.
func (e *env) setToken(ctx context.Context, t *testing.T, token string) {
	t.Helper()
	s, err := e.kube.CoreV1().Secrets(cloudNamespace).Get(ctx, cloudSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{tokenKey: []byte(token)}
	s.StringData = nil
	// Consent for the test's identity too (C1; the Deployment requires it, B6).
	s.Annotations[v1alpha1.AnnotationCredentialIdentities] = identity
	if _, err := e.kube.CoreV1().Secrets(cloudNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) mirror(ctx context.Context, t *testing.T) *corev1.Secret {
	t.Helper()
	m, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, credentials.MirrorName(identity), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the mirror: %v", err)
	}
	return m
}

// jobsOf lists owner's Jobs of action ("": any), oldest first.
func (e *env) jobsOf(ctx context.Context, t *testing.T, owner types.UID, action v1alpha1.JobAction) []batchv1.Job {
	t.Helper()
	list, err := e.kube.BatchV1().Jobs(tenant).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue})
	if err != nil {
		t.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		if metav1.IsControlledBy(&j, &metav1.ObjectMeta{UID: owner}) && (action == "" || j.Annotations[v1alpha1.AnnotationJobAction] == string(action)) {
			out = append(out, j)
		}
	}
	for i := 1; i < len(out); i++ {
		for k := i; k > 0 && out[k].CreationTimestamp.Before(&out[k-1].CreationTimestamp); k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out
}

// waitJob waits until the cluster has n Jobs of action and returns the nth.
func (e *env) waitJob(ctx context.Context, t *testing.T, owner types.UID, action v1alpha1.JobAction, n int) batchv1.Job {
	t.Helper()
	var got []batchv1.Job
	e.waitFor(ctx, t, 2*time.Minute, fmt.Sprintf("%s Job number %d", action, n), func() (bool, string) {
		got = e.jobsOf(ctx, t, owner, action)
		return len(got) >= n, fmt.Sprintf("%d Jobs; cluster: %s", len(got), e.clusterConditions(ctx))
	})
	return got[n-1]
}

func (e *env) job(ctx context.Context, t *testing.T, name string) *batchv1.Job {
	t.Helper()
	j, err := e.kube.BatchV1().Jobs(tenant).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (e *env) waitJobDone(ctx context.Context, t *testing.T, name string, timeout time.Duration) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	e.waitFor(ctx, t, timeout, "Job "+name+" finished", func() (bool, string) {
		j = e.job(ctx, t, name)
		return jobFinished(j), jobState(j) + "; pods: " + e.podSummary(ctx, tenant)
	})
	return j
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobSucceeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobState(j *batchv1.Job) string {
	var parts []string
	for _, c := range j.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("active %d, succeeded %d, failed %d, conditions %v", j.Status.Active, j.Status.Succeeded, j.Status.Failed, parts)
}

func (e *env) clusterConditions(ctx context.Context) string {
	return e.conditionsNamed(ctx, clusterName)
}

func (e *env) waitClusterCondition(ctx context.Context, t *testing.T, ct v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason, timeout time.Duration) {
	t.Helper()
	e.waitFor(ctx, t, timeout, fmt.Sprintf("cluster %s=%s/%s", ct, status, reason), func() (bool, string) {
		c, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, clusterName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		x := apimeta.FindStatusCondition(c.Status.Conditions, string(ct))
		return x != nil && x.Status == status && (reason == "" || x.Reason == string(reason)) && x.ObservedGeneration == c.Generation,
			e.clusterConditions(ctx)
	})
}

func (e *env) identityCondition(ctx context.Context, t *testing.T, ct v1alpha1.ConditionType) *metav1.Condition {
	t.Helper()
	id, err := e.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(ctx, identity, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return apimeta.FindStatusCondition(id.Status.Conditions, string(ct))
}

func (e *env) waitIdentityCondition(ctx context.Context, t *testing.T, ct v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason, timeout time.Duration) {
	t.Helper()
	e.waitFor(ctx, t, timeout, fmt.Sprintf("identity %s=%s/%s", ct, status, reason), func() (bool, string) {
		c := e.identityCondition(ctx, t, ct)
		if c == nil {
			return false, "no condition"
		}
		return c.Status == status && c.Reason == string(reason), c.Reason + ": " + c.Message
	})
}

func (e *env) editCluster(ctx context.Context, t *testing.T, edit func(*v1alpha1.TerraformCluster)) {
	t.Helper()
	e.editClusterNamed(ctx, t, clusterName, edit)
}

// editClusterNamed updates the tenant's TerraformCluster name with edit,
// again on a conflict.
func (e *env) editClusterNamed(ctx context.Context, t *testing.T, name string, edit func(*v1alpha1.TerraformCluster)) {
	t.Helper()
	e.waitFor(ctx, t, time.Minute, name+" updated", func() (bool, string) {
		c, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		edit(c)
		_, err = e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Update(ctx, c, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
		return err == nil, fmt.Sprint(err)
	})
}

func (e *env) editIdentity(ctx context.Context, t *testing.T, edit func(*v1alpha1.TerraformClusterIdentity)) {
	t.Helper()
	e.waitFor(ctx, t, time.Minute, "the identity updated", func() (bool, string) {
		id, err := e.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(ctx, identity, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		edit(id)
		_, err = e.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Update(ctx, id, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
		return err == nil, fmt.Sprint(err)
	})
}

// waitFor polls cond until it holds, failing with what was last seen.
func (e *env) waitFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %s; last seen: %s", what, timeout, last)
		}
		time.Sleep(time.Second)
	}
}

// dumpState logs what helps after a failure: pods, the manager's and the
// Jobs' logs.
func (e *env) dumpState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if e.capi != nil {
		t.Logf("Cluster API objects in %s:\n%s", tenant, e.capiSummary(ctx))
		t.Logf("Cluster API's manager, the end of its log:\n%s", e.capi.LogTail(16<<10))
	}
	for _, ns := range []string{systemNamespace, cloudNamespace, tenant} {
		t.Logf("pods in %s: %s", ns, e.podSummary(ctx, ns))
		pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			for _, c := range p.Spec.Containers {
				b, err := e.kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptrTo[int64](60)}).DoRaw(ctx)
				t.Logf("log of %s/%s %s (err %v):\n%s", ns, p.Name, c.Name, err, b)
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func variables(t *testing.T, v map[string]any) *runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &runtime.RawExtension{Raw: b}
}

// checkOutputs proves T4 and T5 on the real node: after the apply, the
// state OpenTofu wrote through the kubernetes backend is read back:
// status.outputs has the module's non-sensitive outputs, the sensitive one
// is named only, the cluster is provisioned, and the manager set
// spec.controlPlaneEndpoint from control_plane_endpoint without starting
// another apply Job for the generation its write made (J1).
func (e *env) checkOutputs(ctx context.Context, t *testing.T, resourceID string) {
	t.Helper()
	var c *v1alpha1.TerraformCluster
	e.waitFor(ctx, t, 2*time.Minute, "outputs, provisioned and spec.controlPlaneEndpoint", func() (bool, string) {
		var err error
		if c, err = e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, clusterName, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		st := c.Status
		return st.Outputs != nil && st.Initialization != nil && st.Initialization.Provisioned != nil && !c.Spec.ControlPlaneEndpoint.IsZero(),
			fmt.Sprintf("outputs %v, initialization %+v, endpoint %+v", st.Outputs != nil, st.Initialization, c.Spec.ControlPlaneEndpoint)
	})
	var outputs struct {
		ResourceID string `json:"resource_id"`
		Endpoint   struct {
			Host string `json:"host"`
			Port int    `json:"port"`
		} `json:"control_plane_endpoint"`
	}
	if err := json.Unmarshal(c.Status.Outputs.Raw, &outputs); err != nil {
		t.Fatalf("T4: status.outputs %s: %v", c.Status.Outputs.Raw, err)
	}
	wantHost := resourceID + ".fakecloud.test"
	if outputs.ResourceID != resourceID || outputs.Endpoint.Host != wantHost || outputs.Endpoint.Port != 6443 {
		t.Errorf("T4: status.outputs %s, want resource_id %s and control_plane_endpoint %s:6443", c.Status.Outputs.Raw, resourceID, wantHost)
	}
	if strings.Contains(string(c.Status.Outputs.Raw), "admin_token") || fmt.Sprint(c.Status.SensitiveOutputs) != "[admin_token]" {
		t.Errorf("T4: the sensitive output must be named only: outputs %s, sensitiveOutputs %v", c.Status.Outputs.Raw, c.Status.SensitiveOutputs)
	}
	if !*c.Status.Initialization.Provisioned {
		t.Errorf("T5: status.initialization.provisioned is false after a successful apply")
	}
	if ep := c.Spec.ControlPlaneEndpoint; ep.Host != wantHost || ep.Port != 6443 {
		t.Errorf("T5: spec.controlPlaneEndpoint %+v, want %s:6443", ep, wantHost)
	}
	if got := c.Annotations[v1alpha1.AnnotationProviderFieldsGeneration]; got != fmt.Sprintf("%d/%s", c.Generation, c.UID) {
		t.Errorf("T5: %s=%q on generation %d", v1alpha1.AnnotationProviderFieldsGeneration, got, c.Generation)
	}
	e.waitFor(ctx, t, time.Minute, "a pass over the generation the manager's write made", func() (bool, string) {
		c, _ = e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, clusterName, metav1.GetOptions{})
		cond := meta.FindStatusCondition(c.Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
		return cond != nil && cond.ObservedGeneration == c.Generation, e.clusterConditions(ctx)
	})
	if n := len(e.jobsOf(ctx, t, c.UID, v1alpha1.JobActionApply)); n != 1 {
		t.Errorf("T5, J1: %d apply Jobs after the manager set spec.controlPlaneEndpoint, want 1", n)
	}
}

// imageDigests reads hack/build-e2e-images.sh's report: a line
// "<name> sha256:<hex> imported|cached" per image.
func imageDigests(report string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && strings.HasPrefix(f[1], "sha256:") {
			out[f[0]] = f[1]
		}
	}
	return out
}

// checkPinned checks O6 on the node: the apply of image recorded the
// digest its pod ran (the kubelet's imageID), which is the image's
// manifest digest.
func (e *env) checkPinned(ctx context.Context, t *testing.T, name, image string) {
	t.Helper()
	want := e.digests[image]
	if want == "" {
		t.Fatalf("no digest of %s in the images' report %v", image, e.digests)
	}
	e.waitFor(ctx, t, time.Minute, "O6: status.source of "+name, func() (bool, string) {
		c, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		src := c.Status.Source
		return src != nil && src.Image == image && src.ImageDigest == want, fmt.Sprintf("status.source %+v, want %s at %s", src, image, want)
	})
}
