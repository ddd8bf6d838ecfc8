package trust

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// maxAttackPeak bounds how far the manager's peak RSS may rise above its
// RSS before an attack of this file: the decoder and the bounded reads
// cost a few MiB; the rest is the garbage collector's slack and the
// informers' transient decoding (B1's test measured up to +14 MiB for a
// flood of 105 MiB). The manager before B10 and B11 peaked hundreds of
// MiB higher on each attack.
const maxAttackPeak = 64 << 20

// stateBomb is a tenant's state Secret crafted to cost the manager memory
// when it reads the outputs after an apply.
type stateBomb struct {
	name string
	data func() []byte
}

// stateBombs are 16 MiB of JSON each once decompressed: within
// MaxStateBytes, so only a decoder bounded while it decodes stops them.
var stateBombs = []stateBomb{
	// The bomb: [0,0,0,...], 16 MiB, about 16 KiB gzipped.
	{"zeros", func() []byte { return gzipRepeat("[", "0,", "0]", 8<<20-2) }},
	// The same as the value of a non-sensitive output, which the decoder
	// before B10 decoded into 8M Go values before checking any size.
	{"output", func() []byte {
		head, tail := `{"version":4,"outputs":{"x":{"value":[`, `]}}}`
		return gzipRepeat(head, "0,", "0"+tail, (16<<20-len(head)-len(tail)-1)/2)
	}},
	// 16M levels of nesting in an output.
	{"nested", func() []byte { return gzipRepeat(`{"version":4,"outputs":{"x":{"value":`, "[", "", 16<<20-64) }},
}

// TestStateBomb covers B10 as the attack of issue 20: a tenant writes a
// crafted state Secret for its cluster, whose apply Job then succeeds, so
// the manager reads the outputs. Each bomb ends as OutputsReadFailed once,
// and the state is not read again (one GET of the Secret through a proxy
// that counts them, over several sync periods); the manager, under the
// shipped GOMEMLIMIT, keeps its PID and its peak RSS within
// maxAttackPeak; and a cluster of another identity converges meanwhile
// (its mirror, its Job, its outputs).
func TestStateBomb(t *testing.T) {
	proxy, kubeconfig := proxied(t)
	var gets getCounter
	gets.observe(proxy, func(path string) bool { return strings.Contains(path, "/secrets/tfstate-") })
	f := startLimited(t, kubeconfig)
	tenant := f.Env.CreateNamespace(t, "tenant", nil)
	other := f.Env.CreateNamespace(t, "other", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(tenant))
	id2 := f.Identity(ref, framework.List(other))

	var paths []string
	var victims []faultkit.Workload
	for _, b := range stateBombs {
		w := cluster(f, tenant, b.name, id, moduleImage)
		victims = append(victims, w)
		s := tfstatetest.Secret(tenant, tfstate.SecretName(jobs.StateSuffix(faultkit.KindCluster, b.name)), jobs.StateSuffix(faultkit.KindCluster, b.name), b.data())
		t.Logf("bomb %s: %d bytes of gzip", b.name, len(s.Data[tfstate.DataKey]))
		if _, err := f.Env.Kube.CoreV1().Secrets(tenant).Create(f.Ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, "/api/v1/namespaces/"+tenant+"/secrets/"+s.Name)
	}
	jobsOf := make([]string, len(victims))
	for i, w := range victims {
		jobsOf[i] = jobOf(f, w, v1alpha1.JobActionApply).Name
	}
	pid := f.Manager.PID()
	before := attackStart(f)

	// The attack: every apply succeeds, and the manager reads the states.
	for _, job := range jobsOf {
		if err := f.Env.FinishJob(f.Ctx, tenant, job, ""); err != nil {
			t.Fatal(err)
		}
	}
	// Meanwhile, another identity's cluster converges.
	control := cluster(f, other, "control", id2, moduleImage)
	f.WaitCondition("control", conds(f, control), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	controlJob := jobOf(f, control, v1alpha1.JobActionApply)
	suffix := jobs.StateSuffix(faultkit.KindCluster, "control")
	good := tfstatetest.Secret(other, tfstate.SecretName(suffix), suffix, tfstatetest.Gzip(tfstatetest.State("pw", map[string]string{"id": `"net-1"`})))
	if _, err := f.Env.Kube.CoreV1().Secrets(other).Create(f.Ctx, good, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Env.FinishJob(f.Ctx, other, controlJob.Name, ""); err != nil {
		t.Fatal(err)
	}

	for i, w := range victims {
		c := f.WaitCondition(w.Name, conds(f, w), v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonOutputsReadFailed)
		t.Logf("%s: %s", w.Name, c.Message)
		if n := gets.get(paths[i]); n != 1 {
			t.Errorf("B10: the state of %s was read %d times, want once", w.Name, n)
		}
	}
	f.WaitCondition("control", conds(f, control), v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)

	// Not read again: three sync periods, each a pass over every object.
	holdsCond(f, "each bomb read once", 3*syncPeriod, func() (bool, string) {
		var counts []string
		ok := true
		for i, p := range paths {
			n := gets.get(p)
			ok = ok && n == 1
			counts = append(counts, fmt.Sprintf("%s %d", victims[i].Name, n))
		}
		return ok, "GETs of the state: " + strings.Join(counts, ", ")
	})
	for _, w := range victims {
		s, err := faultkit.GetWorkload(f.Ctx, f.Env.Captf, w)
		if err != nil {
			t.Fatal(err)
		}
		requireConditionOnce(t, w.Name, s.Conditions)
	}
	survived(f, pid)
	requirePeakBelow(f, "B10 state bombs", before, maxAttackPeak)
	f.RequireNoSecretValues(forbiddenValues()...)
}

// requireConditionOnce checks that OutputsAvailable=False/OutputsReadFailed
// is reported once: its last transition did not move after the read.
func requireConditionOnce(t *testing.T, name string, conds []metav1.Condition) {
	t.Helper()
	for _, c := range conds {
		if c.Type == string(v1alpha1.ConditionOutputsAvailable) {
			if c.Reason != string(v1alpha1.ReasonOutputsReadFailed) {
				t.Errorf("%s: OutputsAvailable %s/%s after the hold", name, c.Status, c.Reason)
			}
			if age := time.Since(c.LastTransitionTime.Time); age < 3*syncPeriod {
				t.Errorf("%s: OutputsAvailable changed %s ago, during the hold", name, age)
			}
			return
		}
	}
	t.Errorf("%s: no OutputsAvailable condition", name)
}
