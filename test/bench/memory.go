package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// memory measures the manager's RSS before and after adding Secrets it
// has no business caching (M9: it watches only captf.io/mirrored=true),
// then after adding large Secrets that carry that label, as any tenant may
// (B1: the cache keeps their metadata, not their data). Each figure is
// reported beside the data added; none is asserted. It runs the manager
// with its default periods.
func (b *bench) memory(ctx context.Context) error {
	const sc = "memory"
	if err := b.managerRun(ctx, sc, "default"); err != nil {
		return err
	}
	var namespaces []string
	for i := range b.cfg.UnrelatedNamespaces {
		namespaces = append(namespaces, fmt.Sprintf("unrelated-%03d", i))
	}
	// The namespaces come first: the manager caches Namespaces (N5), and
	// this scenario is about Secrets.
	if err := b.createNamespaces(ctx, namespaces, nil); err != nil {
		return err
	}
	if _, _, err := b.e.waitIdle(ctx); err != nil {
		return err
	}
	rssBefore, heapBefore, err := b.sampleMemory(ctx)
	if err != nil {
		return err
	}
	before, err := b.e.mgr.metrics(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.log, "manager RSS %.1f MiB; adding %d unrelated %d-byte Secrets in %d namespaces\n", faultkit.MiB(rssBefore), b.cfg.UnrelatedSecrets, b.cfg.UnrelatedSize, len(namespaces))
	start := time.Now()
	err = parallel(ctx, b.cfg.UnrelatedSecrets, b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		payload := make([]byte, b.cfg.UnrelatedSize)
		_, _ = rand.Read(payload)
		ns := namespaces[i%len(namespaces)]
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("unrelated-%05d", i),
			Labels: map[string]string{"app": "unrelated"}}, Data: map[string][]byte{"payload": payload}}
		_, err := b.e.kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating unrelated Secrets: %w", err)
	}
	created := time.Since(start)
	rssAfter, heapAfter, err := b.settledMemory(ctx)
	if err != nil {
		return err
	}
	after, err := b.e.mgr.metrics(ctx)
	if err != nil {
		return err
	}
	d := faultkit.Diff(before, after)
	r := b.res
	r.add(sc, "manager RSS (VmRSS), before", faultkit.MiB(rssBefore), unitMiB)
	r.add(sc, fmt.Sprintf("manager RSS with %d unrelated %d-byte Secrets (vs before)", b.cfg.UnrelatedSecrets, b.cfg.UnrelatedSize), faultkit.MiB(rssAfter), unitMiB).vs(faultkit.MiB(rssBefore))
	r.add(sc, "RSS growth", 100*(float64(rssAfter)/float64(rssBefore)-1), unitPercent)
	r.add(sc, "unrelated Secret data added", faultkit.MiB(int64(b.cfg.UnrelatedSecrets)*int64(b.cfg.UnrelatedSize)), unitMiB)
	r.add(sc, "Go heap in use, before", faultkit.MiB(heapBefore), unitMiB)
	r.add(sc, "Go heap in use, after (vs before)", faultkit.MiB(heapAfter), unitMiB).vs(faultkit.MiB(heapBefore))
	r.add(sc, "creating the Secrets (fast client)", created.Seconds(), unitSeconds)
	r.add(sc, "manager API requests meanwhile", d.Sum("captf_api_requests_total", nil), unitCount)
	r.requests(sc, fmt.Sprintf("while %d unrelated Secrets were added", b.cfg.UnrelatedSecrets), d)
	if w := d.MirrorWrites(); w > 0 {
		r.note("memory: %v mirror writes while unrelated Secrets were added", w)
	}
	if b.cfg.LabelledSecrets == 0 {
		return nil
	}
	return b.labelledMemory(ctx, rssAfter, heapAfter)
}

// labelledNamespace holds the labelled Secrets of the memory scenario and
// the look-alike mirror of memorySentinel that tells when the manager's
// informer has delivered them all.
const (
	labelledNamespace = "labelled"
	memorySentinel    = "memory-sentinel"
)

// labelledMemory adds -labelled-secrets Secrets of -labelled-size bytes
// labelled captf.io/mirrored=true (every fourth also captf.io/managed=true)
// and reports the manager's RSS and heap beside rssBefore and heapBefore
// and the data added (SPEC B1). A look-alike mirror of an identity,
// created last, tells when the Secret informer (one ordered watch) has
// delivered them all: the identity then lists its namespace (S2). All of
// it is deleted afterwards, so later scenarios see no extra mirror.
func (b *bench) labelledMemory(ctx context.Context, rssBefore, heapBefore int64) error {
	const sc = "memory"
	n, size := b.cfg.LabelledSecrets, b.cfg.LabelledSize
	if err := b.createNamespaces(ctx, []string{labelledNamespace}, nil); err != nil {
		return err
	}
	if err := b.createSource(ctx, memorySentinel, credentialData()); err != nil {
		return err
	}
	if err := b.createIdentity(ctx, memorySentinel, memorySentinel, &v1alpha1.AllowedNamespaces{List: []string{labelledNamespace}}); err != nil {
		return err
	}
	defer b.deleteLabelled()
	fmt.Fprintf(b.log, "adding %d %d-byte Secrets labelled %s=true\n", n, size, v1alpha1.LabelMirrored)
	err := parallel(ctx, n, b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		s := faultkit.LabelledSecret(labelledNamespace, fmt.Sprintf("labelled-%04d", i), size, i)
		_, err := b.e.kube.CoreV1().Secrets(labelledNamespace).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating labelled Secrets: %w", err)
	}
	sentinel := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: labelledNamespace, Name: credentials.MirrorName(memorySentinel),
		Labels:      map[string]string{v1alpha1.LabelMirrored: v1alpha1.LabelTrue},
		Annotations: map[string]string{v1alpha1.AnnotationIdentity: memorySentinel, v1alpha1.AnnotationSourceHash: "sentinel"}}}
	if _, err := b.e.kube.CoreV1().Secrets(labelledNamespace).Create(ctx, sentinel, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ids := b.e.captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	if _, err := waitFor(ctx, "the manager's Secret informer delivering the labelled Secrets", b.cfg.Timeout, 250*time.Millisecond, func() (bool, string) {
		i, err := ids.Get(ctx, memorySentinel, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return contains(i.Status.Namespaces, labelledNamespace), fmt.Sprintf("status.namespaces %v", i.Status.Namespaces)
	}); err != nil {
		return err
	}
	rss, heap, err := b.settledMemory(ctx)
	if err != nil {
		return err
	}
	data := int64(n) * int64(size)
	r := b.res
	r.add(sc, fmt.Sprintf("manager RSS with %d labelled %d KiB Secrets (vs before them)", n, size>>10), faultkit.MiB(rss), unitMiB).vs(faultkit.MiB(rssBefore))
	r.add(sc, "labelled Secret data added", faultkit.MiB(data), unitMiB)
	r.add(sc, "RSS growth, share of the labelled data added", 100*float64(rss-rssBefore)/float64(data), unitPercent)
	r.add(sc, "Go heap in use with the labelled Secrets (vs before them)", faultkit.MiB(heap), unitMiB).vs(faultkit.MiB(heapBefore))
	return nil
}

// deleteLabelled removes what labelledMemory created but the namespace.
func (b *bench) deleteLabelled() {
	ctx := context.Background()
	secrets := b.e.kube.CoreV1().Secrets(labelledNamespace)
	if err := secrets.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(b.log, "deleting the labelled Secrets: %v\n", err)
	}
	if err := b.e.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(ctx, memorySentinel, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(b.log, "deleting identity %s: %v\n", memorySentinel, err)
	}
}

// settledMemory waits -memory-settle and until the manager is idle, then
// samples its memory.
func (b *bench) settledMemory(ctx context.Context) (rss, heap int64, err error) {
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(b.cfg.MemorySettle):
	}
	if _, _, err := b.e.waitIdle(ctx); err != nil {
		return 0, 0, err
	}
	return b.sampleMemory(ctx)
}

// sampleMemory returns the median of five RSS samples a second apart,
// and the Go heap in use from the last scrape.
func (b *bench) sampleMemory(ctx context.Context) (rss, heap int64, err error) {
	rss, err = faultkit.MedianRSS(ctx, b.e.mgr.PID(), 5, time.Second)
	if err != nil {
		return 0, 0, err
	}
	m, err := b.e.mgr.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	return rss, int64(m.Sum("go_memstats_heap_inuse_bytes", nil)), nil
}
