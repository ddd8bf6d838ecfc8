package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/test/integration/framework/faultkit"
)

// memory measures the manager's RSS before and after adding Secrets it
// has no business caching (M9: it watches only captf.io/mirrored=true).
// It runs the manager with its default periods.
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
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.cfg.MemorySettle):
	}
	if _, _, err := b.e.waitIdle(ctx); err != nil {
		return err
	}
	rssAfter, heapAfter, err := b.sampleMemory(ctx)
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
	r.add(sc, "Go heap in use, before", faultkit.MiB(heapBefore), unitMiB)
	r.add(sc, "Go heap in use, after (vs before)", faultkit.MiB(heapAfter), unitMiB).vs(faultkit.MiB(heapBefore))
	r.add(sc, "creating the Secrets (fast client)", created.Seconds(), unitSeconds)
	r.add(sc, "manager API requests meanwhile", d.Sum("captf_api_requests_total", nil), unitCount)
	r.requests(sc, fmt.Sprintf("while %d unrelated Secrets were added", b.cfg.UnrelatedSecrets), d)
	if w := d.MirrorWrites(); w > 0 {
		r.note("memory: %v mirror writes while unrelated Secrets were added", w)
	}
	return nil
}

// sampleMemory returns the median of five RSS samples a second apart,
// and the Go heap in use from the last scrape.
func (b *bench) sampleMemory(ctx context.Context) (rss, heap int64, err error) {
	var samples []int64
	for i := range 5 {
		if i > 0 {
			select {
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		v, err := b.e.mgr.rss()
		if err != nil {
			return 0, 0, err
		}
		samples = append(samples, v)
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	m, err := b.e.mgr.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	return samples[len(samples)/2], int64(m.Sum("go_memstats_heap_inuse_bytes", nil)), nil
}
