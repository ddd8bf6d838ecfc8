package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/test/fakecloud"
)

// labelRetainedFrom labels a retained state's Secrets (SPEC O5).
const labelRetainedFrom = "captf.io/retained-from-uid"

// restoreDamagedState: O5's restore on the real node, with the drift
// module, whose provider reads its resource back from the fake cloud on
// every refresh and creates it with PUT /resources/<id>. Serial N is
// applied and backed up (status.stateBackups, the backup Secret); then
// the state Secret is overwritten with a valid state of serial N+1 that
// holds no resource, as an operator's mistake or a `state rm` leaves it.
// From that state an apply would plan a create and send PUT /resources/<id>
// (the fake cloud answers a PUT of an existing id 200 and keeps one
// resource, so the create is what shows it, not a duplicate). The
// annotation captf.io/restore-state=N runs a restore Job
// (RestoreJobSucceeded=True/StateRestored); the state holds the resource
// again; the apply that captf.io/retry runs then only reads the resource
// (GET, 200) and sends no PUT, POST, PATCH or DELETE: the fake cloud still
// holds exactly the original resource with its content. The deletion's
// destroy deletes it: the fake cloud is empty. What is proven is that the
// backend's state after the restore is serial N's, tied to the existing
// resource; the fake cloud's record shows the apply did not create it.
func (e *env) restoreDamagedState(ctx context.Context, t *testing.T) {
	const name = "demo-restore"
	id := moduleID(tenant, name)
	c := e.createTenantCluster(ctx, t, "O5", name, driftModuleImage, map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint},
		func(c *v1alpha1.TerraformCluster) {
			c.Spec.Drift = &v1alpha1.DriftSpec{IntervalSeconds: ptrTo[int32](0)}
		})
	e.waitTenantClusterReady(ctx, t, name, "O5: "+name+" Ready")
	var backup v1alpha1.StateBackup
	e.waitFor(ctx, t, 2*time.Minute, "O5: the applied serial backed up", func() (bool, string) {
		got, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(got.Status.StateBackups) == 0 {
			return false, fmt.Sprint(err)
		}
		backup = got.Status.StateBackups[0]
		return true, ""
	})
	stateSecret := "tfstate-default-" + jobs.StateSuffix("TerraformCluster", name)
	st := e.readState(ctx, t, stateSecret)
	if st.Serial != backup.Serial || len(st.Resources) != 1 {
		t.Fatalf("O5: the state holds serial %d with %d resources, the newest backup serial %d; want the backup of the applied serial with the resource", st.Serial, len(st.Resources), backup.Serial)
	}
	if _, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, backup.SecretName, metav1.GetOptions{}); err != nil {
		t.Fatalf("O5: the backup Secret %s: %v", backup.SecretName, err)
	}
	t.Logf("O5: serial %d applied and backed up in %s", backup.Serial, backup.SecretName)

	// The damage: a valid state, one serial newer, with no resource.
	damaged := st
	damaged.Serial, damaged.Resources, damaged.Outputs = st.Serial+1, []json.RawMessage{}, map[string]json.RawMessage{}
	e.writeState(ctx, t, stateSecret, damaged)
	if got := e.readState(ctx, t, stateSecret); got.Serial != st.Serial+1 || len(got.Resources) != 0 {
		t.Fatalf("O5: the damaged state reads back as serial %d with %d resources", got.Serial, len(got.Resources))
	}

	restoreAt := time.Now()
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) {
		c.Annotations[v1alpha1.AnnotationRestoreState] = fmt.Sprint(backup.Serial)
	})
	cond := e.waitConditionNamed(ctx, t, name, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonStateRestored)
	t.Logf("O5: StateRestored %s after the annotation: %s", time.Since(restoreAt).Round(time.Second), cond.Message)
	restored := e.readState(ctx, t, stateSecret)
	if len(restored.Resources) != 1 || restored.Lineage != st.Lineage {
		t.Fatalf("O5: the state after the restore holds %d resources (lineage %s), want serial %d's one resource (lineage %s)", len(restored.Resources), restored.Lineage, backup.Serial, st.Lineage)
	}
	t.Logf("O5: the restored state's serial is %d, with serial %d's resource", restored.Serial, backup.Serial)

	// The apply against the restored state takes the resource for its own.
	before := lastSeq(e.cloud.seen(ctx, t))
	applyAt := time.Now()
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) {
		c.Annotations[v1alpha1.AnnotationRetry] = "after-restore"
	})
	second := e.waitRetryJob(ctx, t, c.UID, "after-restore")
	if d := e.waitJobDone(ctx, t, second.Name, 5*time.Minute); !jobSucceeded(d) {
		t.Fatalf("O5: the apply after the restore: %s; pods: %s", jobState(d), e.podSummary(ctx, tenant))
	}
	t.Logf("O5: the apply after the restore finished %s after the retry", time.Since(applyAt).Round(time.Second))
	seen := e.cloud.seen(ctx, t)
	var writes []fakecloud.Request
	for _, m := range []string{http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		writes = append(writes, match{after: before, method: m, path: "/resources/" + id}.filter(seen)...)
		writes = append(writes, match{after: before, method: m, path: "/resources"}.filter(seen)...)
	}
	reads := match{after: before, method: http.MethodGet, path: "/resources/" + id}.filter(seen)
	if len(writes) != 0 || len(reads) == 0 || reads[0].Status != 200 {
		t.Errorf("O5: the apply %s after the restore: want reads of %s (200) and no write; seen since:%s", second.Name, id, describe(match{after: before}.all(seen)))
	}
	if n := e.countResources(ctx, t); n != 1 || e.contentOf(ctx, t, id) != driftContent {
		t.Errorf("O5: the fake cloud holds %d resources, %s with content %q; want the one original", n, id, e.contentOf(ctx, t, id))
	}
	e.deleteTenantCluster(ctx, t, name)
	if n := e.countResources(ctx, t); n != 0 {
		t.Errorf("O5: the fake cloud holds %d resources after the deletion", n)
	}
}

// state is the part of a Terraform state the restore step reads and
// writes; other fields are kept as they are.
type state struct {
	Version          int                        `json:"version"`
	TerraformVersion string                     `json:"terraform_version"`
	Serial           int64                      `json:"serial"`
	Lineage          string                     `json:"lineage"`
	Outputs          map[string]json.RawMessage `json:"outputs"`
	Resources        []json.RawMessage          `json:"resources"`
	CheckResults     json.RawMessage            `json:"check_results"`
}

func (e *env) readState(ctx context.Context, t *testing.T, secret string) state {
	t.Helper()
	s, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the state Secret %s: %v", secret, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(s.Data[tfstate.DataKey]))
	if err != nil {
		t.Fatalf("the state in %s: %v", secret, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("the state in %s: %v", secret, err)
	}
	return st
}

func (e *env) writeState(ctx context.Context, t *testing.T, secret string, st state) {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data[tfstate.DataKey] = buf.Bytes()
	if _, err := e.kube.CoreV1().Secrets(tenant).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the state %s: %v", secret, err)
	}
}

// retainAndAdopt: O5's Retain and adoptRetainedState on the real node,
// with the e2e module (its create is PUT /resources/<id>, its destroy
// DELETE). A cluster under deletionPolicy Retain is deleted: no DELETE
// reaches the fake cloud (no destroy ran), the resource and the state
// Secret stay, the Secret labelled captf.io/retained-from-uid=<uid>. A
// new cluster of the same name waits with
// ApplyJobSucceeded=False/RetainedStateExists and starts no apply Job;
// with spec.adoptRetainedState it adopts (RetainedStateAdopted), is Ready,
// and no create (PUT or POST) reaches the fake cloud: its apply used the
// retained state, where an empty one would have created. Deleted under
// the default policy, its destroy empties the fake cloud.
func (e *env) retainAndAdopt(ctx context.Context, t *testing.T) {
	const name = "demo-retain"
	id := moduleID(tenant, name)
	vars := map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint}
	old := e.createTenantCluster(ctx, t, "O5", name, moduleImage, vars, func(c *v1alpha1.TerraformCluster) {
		c.Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
	})
	e.waitTenantClusterReady(ctx, t, name, "O5: "+name+" Ready")
	stateSecret := "tfstate-default-" + jobs.StateSuffix("TerraformCluster", name)
	before := lastSeq(e.cloud.seen(ctx, t))
	deleted := time.Now()
	clusters := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant)
	if err := clusters.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, t, 3*time.Minute, "O5: the retained cluster gone", func() (bool, string) {
		_, err := clusters.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	t.Logf("O5: the Retain cluster was gone %s after its deletion", time.Since(deleted).Round(time.Millisecond))
	if dels := (match{after: before, method: http.MethodDelete, path: "/resources/" + id}).filter(e.cloud.seen(ctx, t)); len(dels) != 0 || !e.holds(ctx, t, id) {
		t.Fatalf("O5: after a Retain deletion the fake cloud got %d DELETEs of %s and holds it: %v", len(dels), id, e.holds(ctx, t, id))
	}
	s, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, stateSecret, metav1.GetOptions{})
	if err != nil || s.Labels[labelRetainedFrom] != string(old.UID) {
		t.Fatalf("O5: the retained state Secret %s: %v, labels %v; want %s=%s", stateSecret, err, labelsOf(s), labelRetainedFrom, old.UID)
	}
	ev := e.waitEvent(ctx, t, name, v1alpha1.EventInfrastructureRetained, corev1.EventTypeNormal)
	t.Logf("O5: InfrastructureRetained: %s", ev)

	// The same name again, without adoptRetainedState: it waits.
	c := e.createTenantCluster(ctx, t, "O5", name, moduleImage, vars)
	cond := e.waitConditionNamed(ctx, t, name, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRetainedStateExists)
	t.Logf("O5: the new %s waits: %s", name, cond.Message)
	if n := len(e.jobsOf(ctx, t, c.UID, "")); n != 0 {
		t.Fatalf("O5: %d Jobs of the new %s before it adopts", n, name)
	}

	adopt := time.Now()
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) { c.Spec.AdoptRetainedState = true })
	ev = e.waitEvent(ctx, t, name, v1alpha1.EventRetainedStateAdopted, corev1.EventTypeNormal)
	e.waitTenantClusterReady(ctx, t, name, "O5: the adopting "+name+" Ready")
	t.Logf("O5: adopted and Ready %s after adoptRetainedState: %s", time.Since(adopt).Round(time.Second), ev)
	seen := e.cloud.seen(ctx, t)
	creates := append(match{after: before, method: http.MethodPut, path: "/resources/" + id}.filter(seen),
		match{after: before, method: http.MethodPost, path: "/resources"}.filter(seen)...)
	if len(creates) != 0 || e.countResources(ctx, t) != 1 || !e.holds(ctx, t, id) {
		t.Errorf("O5: after the adoption: %d creates, %d resources; want none and the one %s; seen:%s", len(creates), e.countResources(ctx, t), id, describe(seen))
	}
	t.Logf("O5: the adopting cluster ran %d apply Jobs", len(e.jobsOf(ctx, t, c.UID, v1alpha1.JobActionApply)))
	if s, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, stateSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("O5: the adopted state Secret %s: %v", stateSecret, err)
	} else if s.Labels[labelRetainedFrom] != "" || !ownedBy(s, c.UID) {
		t.Errorf("O5: the adopted state Secret %s: labels %v, owners %v; want no %s and owned by %s", stateSecret, s.Labels, s.OwnerReferences, labelRetainedFrom, c.UID)
	}
	e.deleteTenantCluster(ctx, t, name)
	if n := e.countResources(ctx, t); n != 0 {
		t.Errorf("O5: the fake cloud holds %d resources after the adopted cluster's deletion", n)
	}
}

func labelsOf(s *corev1.Secret) map[string]string {
	if s == nil {
		return nil
	}
	return s.Labels
}

func ownedBy(s *corev1.Secret, uid types.UID) bool {
	for _, r := range s.OwnerReferences {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// all selects the recorded requests after m.after, whatever they are.
func (m match) all(seen []fakecloud.Request) []fakecloud.Request {
	var out []fakecloud.Request
	for _, r := range seen {
		if r.Seq > m.after {
			out = append(out, r)
		}
	}
	return out
}

// waitRetryJob waits for the apply Job of owner started for the
// captf.io/retry value (the Job records it, SPEC T7).
func (e *env) waitRetryJob(ctx context.Context, t *testing.T, owner types.UID, value string) batchv1.Job {
	t.Helper()
	var job batchv1.Job
	e.waitFor(ctx, t, 2*time.Minute, "the apply Job of captf.io/retry="+value, func() (bool, string) {
		all := e.jobsOf(ctx, t, owner, v1alpha1.JobActionApply)
		for _, j := range all {
			if j.Annotations[v1alpha1.AnnotationRetry] == value {
				job = j
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d apply Jobs", len(all))
	})
	t.Logf("the apply Job %s of captf.io/retry=%s (%d apply Jobs)", job.Name, value, len(e.jobsOf(ctx, t, owner, v1alpha1.JobActionApply)))
	return job
}
