package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// TestStateRecoveryOnNode proves issue 23's state recovery on the real
// node (SPEC O3, O5), in an environment of its own so it runs alone:
//
//	flock /tmp/captf-node.lock env CAPTF_E2E=1 go test -count=1 -v -timeout 40m -run TestStateRecoveryOnNode ./test/e2e/
//
// StaleLock (O3, A3-48): a Job SIGKILLed while Terraform holds the state
// lock leaves the Lease held; the next Job's start releases it
// (ForceUnlocked naming the Job and the lock) and succeeds. Restore (O5,
// A3-44, state_restore_test.go): a damaged state is put back from a
// backup, and the apply after it takes the fake cloud's resource for its
// own instead of creating it. Retain (O5, A3-45): a Retain deletion keeps
// the resource and the state, a new object of the name waits until it
// adopts them, and its apply creates nothing.
func TestStateRecoveryOnNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	e, cp := start(ctx, t, false)
	e.runSteps(ctx, t, cp, []step{
		{"Setup", e.stateSetup},
		{"StaleLock", e.staleLockForceUnlocked},
		{"Restore", e.restoreDamagedState},
		{"Retain", e.retainAndAdopt},
		{"NoCredentialInLogsOrEvents", e.noCredentialInLogs},
	})
}

// stateSetup makes the tenant and the identity, with tokenB the fake
// cloud's current credential (the helpers that ask the fake cloud use it,
// as after the lifecycle's rotation).
func (e *env) stateSetup(ctx context.Context, t *testing.T) {
	e.createTenant(ctx, t)
	e.setToken(ctx, t, tokenB)
	start := time.Now()
	e.waitFor(ctx, t, 2*time.Minute, "the fake cloud to accept tokenB", func() (bool, string) {
		var who struct{}
		err := e.cloud.get(ctx, "/whoami", tokenB, &who)
		return err == nil, fmt.Sprint(err)
	})
	t.Logf("the fake cloud accepted tokenB %s after the Secret was written", time.Since(start).Round(time.Millisecond))
	e.createIdentity(ctx, t)
}

// staleLockForceUnlocked: O3 on the real node. The first apply waits in
// the module's rotation probe after its resource exists, holding the
// state's Lease; the test SIGKILLs the runner and everything under it
// (Terraform, the provisioner) from the host, as an OOM kill or a lost
// node would: nothing releases the lock. The test checks that the Lease
// is still held by the dead Job's pod once the Job has failed (exit 137,
// a failure, not an interruption): the next Job's Terraform would wait
// for it and fail (StateLocked) unless the manager released it. The spec
// then drops the probe; the next Job's start emits ForceUnlocked naming
// the Job and the Lease, the apply succeeds, the cluster is Ready, the
// Lease is free, and the fake cloud holds the one resource.
func (e *env) staleLockForceUnlocked(ctx context.Context, t *testing.T) {
	const name = "demo-lock"
	vars := map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "rotation_wait_seconds": 300}
	c := e.createTenantCluster(ctx, t, "O3", name, moduleImage, vars)
	first := e.waitJob(ctx, t, c.UID, v1alpha1.JobActionApply, 1)
	id := moduleID(tenant, name)
	suffix := jobs.StateSuffix("TerraformCluster", name)
	lease := "lock-tfstate-default-" + suffix
	e.waitFor(ctx, t, 3*time.Minute, "O3: the first apply created its resource and holds the lock", func() (bool, string) {
		holder, info := e.leaseHolder(ctx, t, lease)
		return e.holds(ctx, t, id) && holder != "", fmt.Sprintf("lease holder %q (%s); pods: %s", holder, info, e.podSummary(ctx, tenant))
	})
	holder, info := e.leaseHolder(ctx, t, lease)
	pod := e.jobPodName(ctx, t, first.Name)
	if !strings.Contains(info, pod) {
		t.Fatalf("O3: the lock %s is not held by the Job's pod %s: lock info %s", lease, pod, info)
	}
	killed := time.Now()
	pids := killRunner(t, "--state-suffix="+suffix)
	t.Logf("O3: SIGKILLed the runner and its descendants %v of %s while it held %s (holder %s)", pids, pod, lease, holder)

	done := e.waitJobDone(ctx, t, first.Name, 2*time.Minute)
	if jobSucceeded(done) {
		t.Fatalf("O3: the killed Job %s succeeded: %s", first.Name, jobState(done))
	}
	t.Logf("O3: the killed Job failed %s after the kill: %s", finishTime(done).Sub(killed).Round(time.Second), jobState(done))
	e.requireExitCode(ctx, t, first.Name, 137)
	if h, _ := e.leaseHolder(ctx, t, lease); h != holder {
		t.Fatalf("O3: the Lease %s after the kill is held by %q, want still %q (nothing released it)", lease, h, holder)
	}
	got, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Status.LastRun; r != nil && r.Job == first.Name && r.Error != nil && r.Error.Kind == v1alpha1.RunErrorInterrupted {
		t.Errorf("O3: a SIGKILLed runner (exit 137) is recorded as an interruption: %+v", *r.Error)
	}

	// Without the probe the next generation applies (its Job may start
	// at once: a spec change is not held by the failure's backoff).
	vars["rotation_wait_seconds"] = 0
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) { c.Spec.Variables = variables(t, vars) })
	second := e.waitJob(ctx, t, c.UID, v1alpha1.JobActionApply, 2)
	t.Logf("O3: the second apply Job %s was created %s after the kill", second.Name, second.CreationTimestamp.Sub(killed).Round(time.Second))
	ev := e.waitEvent(ctx, t, name, v1alpha1.EventForceUnlocked, corev1.EventTypeWarning)
	t.Logf("O3: ForceUnlocked %s after the kill: %s", time.Since(killed).Round(time.Second), ev)
	for _, want := range []string{lease, first.Name} {
		if !strings.Contains(ev, want) {
			t.Errorf("O3: the ForceUnlocked event does not name %s: %s", want, ev)
		}
	}
	if d := e.waitJobDone(ctx, t, second.Name, 5*time.Minute); !jobSucceeded(d) {
		t.Fatalf("O3: the apply after the force-unlock: %s; pods: %s", jobState(d), e.podSummary(ctx, tenant))
	}
	e.waitTenantClusterReady(ctx, t, name, "O3: "+name+" Ready after the force-unlock")
	t.Logf("O3: Ready %s after the kill", time.Since(killed).Round(time.Second))
	if h, _ := e.leaseHolder(ctx, t, lease); h != "" {
		t.Errorf("O3: the Lease %s is held by %q after the successful apply", lease, h)
	}
	if n := e.countResources(ctx, t); n != 1 || !e.holds(ctx, t, id) {
		t.Errorf("O3: the fake cloud holds %d resources, want the one %s", n, id)
	}
	e.deleteTenantCluster(ctx, t, name)
}

// leaseHolder is the holder and the lock info of the Lease name, empty
// when it is free or missing.
func (e *env) leaseHolder(ctx context.Context, t *testing.T, name string) (string, string) {
	t.Helper()
	l, err := e.kube.CoordinationV1().Leases(tenant).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", "no Lease"
	}
	if err != nil {
		t.Fatal(err)
	}
	info := l.Annotations["app.terraform.io/lock-info"]
	if l.Spec.HolderIdentity == nil {
		return "", info
	}
	return *l.Spec.HolderIdentity, info
}

// killRunner SIGKILLs, from the node's host, the `captf runner apply`
// process whose arguments hold arg and every process under it, children
// first, and returns their pids. It fails when there is no such runner
// or nothing under it (Terraform must be killed too).
func killRunner(t *testing.T, arg string) []int {
	t.Helper()
	parents := map[int]int{}
	runner := 0
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after ")".
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 1 {
			parents[pid], _ = strconv.Atoi(f[1])
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 3 && args[1] == "runner" && args[2] == "apply" && strings.Contains(string(cmd), "\x00"+arg+"\x00") {
			if runner != 0 {
				t.Fatalf("two runners with %s: %d and %d", arg, runner, pid)
			}
			runner = pid
		}
	}
	if runner == 0 {
		t.Fatalf("no `captf runner apply` process with %s on the node", arg)
	}
	// Descendants, deepest last, killed in reverse.
	tree := []int{runner}
	for i := 0; i < len(tree); i++ {
		for pid, ppid := range parents {
			if ppid == tree[i] {
				tree = append(tree, pid)
			}
		}
	}
	if len(tree) < 2 {
		t.Fatalf("the runner %d runs nothing (no Terraform under it)", runner)
	}
	for i := len(tree) - 1; i >= 0; i-- {
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(tree[i]), "cmdline"))
		name := strings.SplitN(string(cmd), "\x00", 2)[0]
		if err := syscall.Kill(tree[i], syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatalf("SIGKILL %d (%s): %v", tree[i], name, err)
		}
		t.Logf("SIGKILL %d %s", tree[i], filepath.Base(name))
	}
	return tree
}

// requireExitCode checks that the Job's pod's main container ended with
// code.
func (e *env) requireExitCode(ctx context.Context, t *testing.T, job string, code int32) {
	t.Helper()
	pods, err := e.kube.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the pod of %s: %v (%d pods)", job, err, len(pods.Items))
	}
	for _, s := range pods.Items[0].Status.ContainerStatuses {
		if s.State.Terminated == nil || s.State.Terminated.ExitCode != code {
			t.Errorf("the container %s of %s: %+v, want terminated with exit code %d", s.Name, job, s.State, code)
		}
	}
}

// waitEvent waits for an event of reason and type on the tenant's object
// name and returns its message.
func (e *env) waitEvent(ctx context.Context, t *testing.T, name, reason, typ string) string {
	t.Helper()
	var msg string
	e.waitFor(ctx, t, 3*time.Minute, "a "+reason+" event on "+name, func() (bool, string) {
		evs, err := e.kube.CoreV1().Events(tenant).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason + ",involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.Type == typ {
				msg = ev.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d %s events; %s", len(evs.Items), reason, e.conditionsNamed(ctx, name))
	})
	return msg
}

// conditionsNamed summarizes the conditions of the tenant's cluster name.
func (e *env) conditionsNamed(ctx context.Context, name string) string {
	c, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, x := range c.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s (%s)", x.Type, x.Status, x.Reason, x.Message))
	}
	return strings.Join(parts, "; ")
}

// waitConditionNamed waits until the tenant's cluster name has the
// condition ct with status and reason.
func (e *env) waitConditionNamed(ctx context.Context, t *testing.T, name string, ct v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	e.waitFor(ctx, t, 5*time.Minute, fmt.Sprintf("%s %s=%s/%s", name, ct, status, reason), func() (bool, string) {
		c, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = meta.FindStatusCondition(c.Status.Conditions, string(ct))
		return got != nil && got.Status == status && got.Reason == string(reason), e.conditionsNamed(ctx, name) + "; pods: " + e.podSummary(ctx, tenant)
	})
	return got
}

// holds says whether the fake cloud holds the resource id.
func (e *env) holds(ctx context.Context, t *testing.T, id string) bool {
	t.Helper()
	for _, r := range e.cloud.resources(ctx, t, tokenB) {
		if r.ID == id {
			return true
		}
	}
	return false
}

func (e *env) countResources(ctx context.Context, t *testing.T) int {
	t.Helper()
	return len(e.cloud.resources(ctx, t, tokenB))
}
