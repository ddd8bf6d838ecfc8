package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

var (
	capiClusterGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	capiMachineGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
)

// capiNamespace is the namespace of Cluster API cluster i.
func capiNamespace(i int) string { return fmt.Sprintf("bench-capi-%04d", i) }

// capi measures the steady state with Cluster API present (issue 21):
// Cluster API's core manager runs, and -capi-clusters Clusters, each with
// -capi-machines Machines, own their TerraformCluster and
// TerraformMachines (one namespace per Cluster, -capi-identities
// identities). A finisher plays each apply Job's pod: it writes the state
// a module would leave (the endpoint, the provider ID) and completes the
// Job. Once every captf object is provisioned and the managers are idle,
// one --sync-period pass must cost one source GET per identity and write
// nothing; then a restart over the same objects must write nothing.
func (b *bench) capi(ctx context.Context) error {
	const sc = "capi"
	n, per, ids := b.cfg.CAPIClusters, b.cfg.CAPIMachines, b.cfg.CAPIIdentities
	if b.e.mgr != nil {
		b.e.mgr.Terminate()
		b.e.mgr = nil
	}
	cm, err := b.e.cp.StartCAPI(ctx, controlplane.CAPIOptions{BinDir: filepath.Join(b.cfg.Root, "bin")})
	if err != nil {
		return err
	}
	defer cm.Stop()
	fmt.Fprintf(b.log, "Cluster API's core manager ready (log %s)\n", cm.LogPath)
	dyn, err := dynamic.NewForConfig(b.e.rest)
	if err != nil {
		return err
	}
	nss := make([]string, n)
	for i := range nss {
		nss[i] = capiNamespace(i)
	}
	if err := b.createNamespaces(ctx, nss, nil); err != nil {
		return err
	}
	for k := range ids {
		id := fmt.Sprintf("bench-capi-id-%02d", k)
		var allowed []string
		for i := k; i < n; i += ids {
			allowed = append(allowed, nss[i])
		}
		if err := b.createSource(ctx, id, credentialData()); err != nil {
			return err
		}
		if err := b.createIdentity(ctx, id, id, &v1alpha1.AllowedNamespaces{List: allowed}); err != nil {
			return err
		}
	}

	// The finisher runs before any manager starts, so it sees every Job.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &jobsWatch{open: map[string]bool{}}
	toFinish := make(chan *batchv1.Job, n*(per+1))
	if err := w.run(wctx, b, toFinish); err != nil {
		return err
	}
	finishErrs := make(chan error, 1)
	go b.capiFinisher(wctx, toFinish, finishErrs)

	p := b.steadyPeriod()
	if err := b.managerRun(ctx, sc, "capi", "--sync-period="+p.String(), "--identity-resync="+b.cfg.LongPeriod.String()); err != nil {
		return err
	}
	first := time.Now()
	err = parallel(ctx, n, b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		return b.createCAPICluster(ctx, dyn, nss[i], fmt.Sprintf("bench-capi-id-%02d", i%ids), per)
	})
	if err != nil {
		return fmt.Errorf("creating Cluster API clusters: %w", err)
	}
	fmt.Fprintf(b.log, "created %d Clusters with %d Machines each, and their captf objects, in %s\n", n, per, time.Since(first).Round(time.Millisecond))

	provisioned := func() (bool, string) {
		done, total := 0, 0
		for _, ns := range nss {
			for _, o := range capiObjects(per) {
				total++
				if s := b.t.status(o.kind, ns, o.name); s != nil && s.Initialization != nil && ptr.Deref(s.Initialization.Provisioned, false) {
					done++
				}
			}
		}
		select {
		case err := <-finishErrs:
			b.res.fail("capi: %v", err)
		default:
		}
		return done == total, fmt.Sprintf("%d of %d provisioned", done, total)
	}
	converged, err := waitFor(ctx, "every captf object provisioned", b.cfg.Timeout, 250*time.Millisecond, provisioned)
	if err != nil {
		b.res.fail("capi: %v", err)
		return err
	}
	objects := float64(n * (per + 1))
	r := b.res
	r.add(sc, fmt.Sprintf("%d Clusters x (1 TerraformCluster + %d TerraformMachines) under Cluster API's core manager: first created -> all provisioned", n, per), converged.Sub(first).Seconds(), unitSeconds)

	d, _, _, err := b.onePass(ctx, "resync tick (--sync-period="+p.String()+")", p, workloadAdds)
	if err != nil {
		return err
	}
	reads := d.Sum("captf_source_reads_total", nil)
	r.add(sc, fmt.Sprintf("steady pass: source GETs (baseline: %d identities)", ids), reads, unitCount).vs(float64(ids))
	r.add(sc, "steady pass: manager API requests", d.TotalRequests(), unitCount).vs(objects)
	r.add(sc, "steady pass: writes of any kind (must be 0)", writesOf(d), unitCount)
	r.requests(sc, "one resync pass with Cluster API present", d)
	if wr := writesOf(d); wr > 0 {
		b.res.fail("capi: the steady pass wrote %.0f times (%s)", wr, faultkit.FormatCounts(d.Requests()))
	}

	for k := 1; k <= b.cfg.CAPIRestarts; k++ {
		if err := b.capiRestart(ctx, k, p, ids, objects); err != nil {
			return err
		}
	}
	cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	if created := len(w.created); created != int(objects) {
		b.res.fail("capi: %d Jobs created for %.0f objects that apply once each", created, objects)
	}
	return nil
}

// capiRestart is the scenario's k-th restart of the manager over the
// provisioned objects: it must read each source once (SPEC P1) and write
// nothing. The first restart's rows keep their names; later ones are
// numbered (-capi-restarts: whether the controllers' start-up batches
// share one read per identity depends on their order, issue 25).
func (b *bench) capiRestart(ctx context.Context, k int, p time.Duration, ids int, objects float64) error {
	const sc = "capi"
	name := "restart"
	if k > 1 {
		name = fmt.Sprintf("restart %d", k)
	}
	started := time.Now()
	if _, err := b.e.startManager(ctx, "capi-restart", "--sync-period="+p.String(), "--identity-resync="+b.cfg.LongPeriod.String()); err != nil {
		return err
	}
	idle, last, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}
	r := b.res
	r.add(sc, name+": start -> idle", last.Sub(started).Seconds(), unitSeconds)
	r.add(sc, name+": source GETs", idle.Sum("captf_source_reads_total", nil), unitCount).vs(float64(ids))
	r.add(sc, name+": workload keys queued (baseline: the objects)", workloadAdds(idle), unitCount).vs(objects)
	if k == 1 {
		for _, q := range workloadQueues {
			r.add(sc, "restart: keys queued on "+q, idle.Get("workqueue_adds_total", "name", q), unitCount)
		}
	}
	r.add(sc, name+": writes of any kind (must be 0)", writesOf(idle), unitCount)
	if k == 1 {
		r.requests(sc, "restart with Cluster API present, until idle", idle)
	}
	if wr := writesOf(idle); wr > 0 {
		b.res.fail("capi: the %s wrote %.0f times (%s)", name, wr, faultkit.FormatCounts(idle.Requests()))
	}
	return nil
}

// writesOf sums the manager's create, update, patch and delete requests.
func writesOf(d faultkit.Metrics) float64 {
	writes := 0.0
	for k, v := range d.Requests() {
		switch verb, _, _ := strings.Cut(k, " "); verb {
		case "create", "update", "patch", "delete":
			writes += v
		}
	}
	return writes
}

type capiObject struct{ kind, name string }

// capiObjects are the captf objects of one Cluster API cluster.
func capiObjects(machines int) []capiObject {
	out := []capiObject{{kindCluster, "tc"}}
	for j := range machines {
		out = append(out, capiObject{kindMachine, fmt.Sprintf("m%d", j)})
	}
	return out
}

// createCAPICluster creates, in ns, a Cluster named c owning the
// TerraformCluster tc, a bootstrap data Secret, and machines Machines mJ
// owning the TerraformMachines mJ, as a user's manifests would (Cluster
// API's controllers set the owner references).
func (b *bench) createCAPICluster(ctx context.Context, dyn dynamic.Interface, ns, identity string, machines int) error {
	src := v1alpha1.SourceSpec{Image: "example.com/bench-module:1"}
	ref := &v1alpha1.IdentityReference{Name: identity}
	tc := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tc"},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref, Source: src}}
	if _, err := b.e.captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, tc, metav1.CreateOptions{}); err != nil {
		return err
	}
	infra := func(kind, name string) map[string]any {
		return map[string]any{"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": kind, "name": name}
	}
	cluster := map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": "c", "namespace": ns},
		"spec":     map[string]any{"infrastructureRef": infra(kindCluster, "tc")},
	}
	if _, err := dyn.Resource(capiClusterGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: cluster}, metav1.CreateOptions{}); err != nil {
		return err
	}
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-bootstrap", Labels: map[string]string{v1alpha1.LabelClusterName: "c"}},
		Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{"value": []byte("#cloud-config\n"), "format": []byte("cloud-config")}}
	if _, err := b.e.kube.CoreV1().Secrets(ns).Create(ctx, boot, metav1.CreateOptions{}); err != nil {
		return err
	}
	for j := range machines {
		name := fmt.Sprintf("m%d", j)
		tm := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.TerraformMachineSpec{IdentityRef: ref, Source: src}}
		if _, err := b.e.captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(ctx, tm, metav1.CreateOptions{}); err != nil {
			return err
		}
		m := map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{
				"clusterName":       "c",
				"bootstrap":         map[string]any{"dataSecretName": "c-bootstrap"},
				"infrastructureRef": infra(kindMachine, name),
			},
		}
		if _, err := dyn.Resource(capiMachineGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// capiFinisher plays each apply Job's pod: it writes the state Secret the
// module would leave, with the outputs Cluster API needs (a cluster's
// endpoint, a machine's provider ID), then completes the Job.
func (b *bench) capiFinisher(ctx context.Context, in <-chan *batchv1.Job, errs chan<- error) {
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for j := range in {
		owner := metav1.GetControllerOfNoCopy(j)
		if owner == nil || jobs.ActionOf(j) != v1alpha1.JobActionApply {
			continue
		}
		outputs := map[string]string{"control_plane_endpoint": `"` + j.Namespace + `.example:6443"`}
		if owner.Kind == kindMachine {
			outputs = map[string]string{"provider_id": `"fake://` + j.Namespace + "/" + owner.Name + `"`}
		}
		suffix := jobs.StateSuffix(owner.Kind, owner.Name)
		state := tfstatetest.Secret(j.Namespace, tfstate.SecretName(suffix), suffix, tfstatetest.Gzip(tfstatetest.State("", outputs)))
		if _, err := b.e.kube.CoreV1().Secrets(j.Namespace).Create(ctx, state, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			if ctx.Err() == nil {
				report(fmt.Errorf("writing the state of %s %s/%s: %w", owner.Kind, j.Namespace, owner.Name, err))
			}
			continue
		}
		if err := b.e.fw.FinishJob(ctx, j.Namespace, j.Name, ""); err != nil && ctx.Err() == nil {
			report(fmt.Errorf("finishing Job %s/%s: %w", j.Namespace, j.Name, err))
		}
	}
}
