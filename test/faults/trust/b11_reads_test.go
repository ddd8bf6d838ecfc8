package trust

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// lookalikeSize is the data of each look-alike state Secret: close to the
// 1 MiB limit of a Secret.
const lookalikeSize = 1000 << 10

// TestStateCleanupLookalikes covers B11 and B15 as the attack of issue 20:
// a tenant puts the two labels of its cluster's state (tfstate=true,
// tfstateSecretSuffix=<suffix>) on many Secrets of 1 MiB, then deletes the
// cluster, whose destroy succeeds. The clean-up after the destroy used to
// LIST every Secret with the labels, data and all, in one response (past
// the shipped memory limit at 150), then delete each: now it lists
// metadata, page by page, and deletes only the backend's names for the
// suffix. The manager keeps its PID and its peak RSS within maxAttackPeak;
// the look-alikes stay; the state Secret and its part go.
func TestStateCleanupLookalikes(t *testing.T) {
	n := scale(40, 150)
	f := startLimited(t)
	tenant := f.Env.CreateNamespace(t, "tenant", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(tenant))
	w := cluster(f, tenant, "victim", id, moduleImage)
	apply := jobOf(f, w, v1alpha1.JobActionApply)
	suffix := jobs.StateSuffix(faultkit.KindCluster, w.Name)
	secrets := f.Env.Kube.CoreV1().Secrets(tenant)
	state := []*corev1.Secret{
		tfstatetest.Secret(tenant, tfstate.SecretName(suffix), suffix, tfstatetest.Gzip(tfstatetest.State("pw", map[string]string{"id": `"net-1"`}))),
		// A stale part is the backend's name too: it goes with the state.
		tfstatetest.Secret(tenant, tfstate.PartName(suffix, 1), suffix, []byte("stale part")),
	}
	for _, s := range state {
		if _, err := secrets.Create(f.Ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Env.FinishJob(f.Ctx, tenant, apply.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(w.Name, conds(f, w), v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)

	// The look-alikes: n Secrets of 1 MiB with the state's labels, and two
	// with names close to the backend's.
	names := []string{tfstate.SecretName(suffix) + "-part1", tfstate.SecretName(suffix) + "-copy"}
	for i := range n {
		names = append(names, fmt.Sprintf("lookalike-%03d", i))
	}
	err := faultkit.Parallel(f.Ctx, len(names), 4, func(ctx context.Context, i int) error {
		data := make([]byte, lookalikeSize)
		_, _ = rand.Read(data)
		_, err := secrets.Create(ctx, tfstatetest.Secret(tenant, names[i], suffix, data), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating the look-alikes: %v", err)
	}
	pid := f.Manager.PID()
	before := attackStart(f)

	// The destroy succeeds; the clean-up runs before the finalizer goes.
	if err := faultkit.DeleteWorkload(f.Ctx, f.Env.Captf, w); err != nil {
		t.Fatal(err)
	}
	destroy := jobOf(f, w, v1alpha1.JobActionDestroy)
	if err := f.Env.FinishJob(f.Ctx, tenant, destroy.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(w.Name+" released after its destroy", func() (bool, string) {
		s, err := faultkit.GetWorkload(f.Ctx, f.Env.Captf, w)
		if err != nil {
			return false, err.Error()
		}
		return !s.Exists, "still exists"
	})

	for _, s := range state {
		if _, err := secrets.Get(f.Ctx, s.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("T2: state Secret %s was not deleted (%v)", s.Name, err)
		}
	}
	kept := 0
	for _, name := range names {
		if _, err := secrets.Get(f.Ctx, name, metav1.GetOptions{}); err == nil {
			kept++
		} else {
			t.Errorf("B15: look-alike %s is gone: %v", name, err)
		}
	}
	t.Logf("B15: %d of %d look-alikes (%.1f MiB) kept; the state Secret and its part deleted", kept, len(names), faultkit.MiB(int64(n)*lookalikeSize))
	survived(f, pid)
	requirePeakBelow(f, fmt.Sprintf("B11 clean-up beside %d look-alikes of 1 MiB", n), before, maxAttackPeak)
}

// TestFreshJobReadFlood covers B11 for the fresh Job read: before it
// creates a Job, the manager confirms the object's Jobs from the API
// server. That read used to LIST every Job labelled captf.io/managed=true
// in the namespace, pod templates and all, once per new Job. Here a tenant
// has many such Jobs of about 1 MiB (forged past B3) when four clusters
// start at once: each gets its apply Job, and the manager keeps its PID
// and its peak RSS within maxAttackPeak.
func TestFreshJobReadFlood(t *testing.T) {
	n := scale(30, 100)
	f := startLimited(t)
	tenant := f.Env.CreateNamespace(t, "tenant", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(tenant))
	err := faultkit.Parallel(f.Ctx, n, 4, func(ctx context.Context, i int) error {
		var env []corev1.EnvVar
		for k := range 4 {
			b := make([]byte, floodSize/8)
			_, _ = rand.Read(b)
			env = append(env, corev1.EnvVar{Name: fmt.Sprintf("BIG_%d", k), Value: hex.EncodeToString(b)})
		}
		_, err := f.Env.Kube.BatchV1().Jobs(tenant).Create(ctx, forgedJob(tenant, fmt.Sprintf("big-%03d", i), nil, nil, env), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating the Job flood: %v", err)
	}
	t.Cleanup(func() { deleteFlood(t, f, tenant) })
	// The informer has delivered the flood once a sample cluster's mirror
	// is written (one ordered watch per kind is not enough to promise it,
	// so the sample also waits for its own Job: its fresh read listed the
	// flood).
	sample := cluster(f, tenant, "sample", id, moduleImage)
	jobOf(f, sample, v1alpha1.JobActionApply)
	pid := f.Manager.PID()
	before := attackStart(f)

	var ws []faultkit.Workload
	for i := range 4 {
		ws = append(ws, cluster(f, tenant, fmt.Sprintf("c%d", i), id, moduleImage))
	}
	for _, w := range ws {
		j := jobOf(f, w, v1alpha1.JobActionApply)
		t.Logf("%s: apply Job %s created beside %d Jobs of %.1f MiB", w, j.Name, n, faultkit.MiB(floodSize))
	}
	survived(f, pid)
	requirePeakBelow(f, fmt.Sprintf("B11 fresh Job reads beside %d Jobs of %.0f KiB", n, float64(floodSize)/1024), before, maxAttackPeak)
}
