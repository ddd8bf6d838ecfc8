// Package identity is the TerraformClusterIdentity status controller (SPEC
// S1-S4, V5, section 13). It re-reads each identity's source Secret uncached
// every --identity-resync (every 30s, or the resync if shorter, while not
// Ready) and on every change, and reports:
//
//   - Ready: SecretFound, SecretNotFound (S1), or the section 14 reasons
//     NotOptedIn (C1), SourceRefused (C2), CredentialsIncomplete (C3), with
//     an event on change;
//   - CredentialsValid: the hygiene report on the source's keys (C4);
//   - RotationComplete and status.rotation: whether the current credentials
//     have reached every mirror and no running Job uses older ones (C5);
//   - status.namespaces: the namespaces holding a real mirror (S2);
//   - status.mirrors and MirrorsCurrent: how many mirrors carry the current
//     source hash, are stale, or are blocked by a foreign Secret (section 13).
//
// When a mirror's hash differs from the source it enqueues that mirror's
// users (S4), so a rotation lands within --identity-resync. It deletes
// mirrors in namespaces the identity no longer allows, every mirror of an
// identity that is gone (V5), and every mirror of a source that may not be
// used (C1, C2). It never writes mirror data itself, never touches the
// source (V6), and writes status only when it changed (S3).
package identity

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/conflicts"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/controllers/source"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
	listers "github.com/captf/captf/pkg/generated/listers/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/metrics"
)

const (
	// notReadyResync is how often an identity that is not Ready is re-read
	// (S1), unless --identity-resync is shorter.
	notReadyResync = 30 * time.Second
	// mirrorEventDelay coalesces the burst of mirror events of a fan-out or
	// a rotation into about one status pass per identity per second.
	mirrorEventDelay = time.Second
	// maxNamespaces bounds status.namespaces (SPEC 1.1); the count is in
	// status.mirrors.total.
	maxNamespaces = 1000
	fieldManager  = "captf-manager"
)

// Options tune the controller.
type Options struct {
	// Resync is --identity-resync (S1).
	Resync time.Duration
	// RequireSourceConsent enforces SPEC C1.
	RequireSourceConsent bool
}

// Informers are the informers the controller reads.
type Informers struct {
	Identities captfinformers.TerraformClusterIdentityInformer
	// Clusters, Machines and Pools tell which mirrors and Jobs belong to a
	// live user of the identity (B2).
	Clusters   captfinformers.TerraformClusterInformer
	Machines   captfinformers.TerraformMachineInformer
	Pools      captfinformers.TerraformMachinePoolInformer
	Namespaces coreinformers.NamespaceInformer
	// Mirrors must be restricted to captf.io/mirrored=true (M9).
	Mirrors coreinformers.SecretInformer
	// Jobs must be restricted to captf.io/managed=true; their
	// captf.io/source-hash says which credentials they run with (C5).
	Jobs batchinformers.JobInformer
}

// Controller reconciles TerraformClusterIdentity status.
type Controller struct {
	kube  kubernetes.Interface
	captf versioned.Interface
	// identities, namespaces and mirrors are read from caches.
	identities    listers.TerraformClusterIdentityLister
	namespaces    corelisters.NamespaceLister
	mirrorIndexer cache.Indexer
	jobIndexer    cache.Indexer
	// resolver tells whether an owner reference names a live user (B2).
	resolver *index.Resolver
	synced   []cache.InformerSynced
	// queue holds identity names.
	queue loop.Queue
	// source reads source Secrets uncached, shared with the workload controller.
	source *source.Reader
	// conflicts are recorded by the workload controller (M7).
	conflicts *conflicts.Tracker
	// enqueueOwners enqueues a stale mirror's users (S4).
	enqueueOwners func(metav1.Object)
	// written holds the status last written per identity (S3 against what
	// is stored, not only the cache).
	written  *loop.Written[v1alpha1.TerraformClusterIdentityStatus]
	recorder record.EventRecorder
	clock    clock.WithTickerAndDelayedExecution
	opts     Options

	// staleSince records, per identity and namespace, when a mirror was
	// first seen stale: captf_mirror_staleness_seconds.
	mu         sync.Mutex
	staleSince map[string]map[string]time.Time
}

// NewController builds the controller; call before the informers start.
func NewController(ctx context.Context, kube kubernetes.Interface, captf versioned.Interface, inf Informers,
	reader *source.Reader, tracker *conflicts.Tracker, enqueueOwners func(metav1.Object), recorder record.EventRecorder, opts Options) (*Controller, error) {
	return newController(ctx, kube, captf, inf, reader, tracker, enqueueOwners, recorder, clock.RealClock{}, opts)
}

func newController(ctx context.Context, kube kubernetes.Interface, captf versioned.Interface, inf Informers,
	reader *source.Reader, tracker *conflicts.Tracker, enqueueOwners func(metav1.Object), recorder record.EventRecorder, clk clock.WithTickerAndDelayedExecution, opts Options) (*Controller, error) {
	metrics.Register()
	resolver, err := index.NewResolver(inf.Clusters, inf.Machines, inf.Pools)
	if err != nil {
		return nil, err
	}
	if err := index.AddMirrorIndexers(inf.Mirrors.Informer()); err != nil {
		return nil, err
	}
	if err := index.AddJobIndexers(inf.Jobs.Informer()); err != nil {
		return nil, err
	}
	c := &Controller{
		kube:          kube,
		captf:         captf,
		identities:    inf.Identities.Lister(),
		namespaces:    inf.Namespaces.Lister(),
		mirrorIndexer: inf.Mirrors.Informer().GetIndexer(),
		jobIndexer:    inf.Jobs.Informer().GetIndexer(),
		resolver:      resolver,
		synced: []cache.InformerSynced{inf.Identities.Informer().HasSynced, inf.Namespaces.Informer().HasSynced,
			inf.Mirrors.Informer().HasSynced, inf.Jobs.Informer().HasSynced,
			inf.Clusters.Informer().HasSynced, inf.Machines.Informer().HasSynced, inf.Pools.Informer().HasSynced},
		queue:         loop.NewQueue("terraformclusteridentity", clk),
		source:        reader,
		conflicts:     tracker,
		enqueueOwners: enqueueOwners,
		written:       loop.NewWritten[v1alpha1.TerraformClusterIdentityStatus](),
		recorder:      recorder,
		clock:         clk,
		opts:          opts,
		staleSince:    map[string]map[string]time.Time{},
	}
	enqueue := func(obj interface{}) {
		if key, ok := loop.KeyOf(obj); ok {
			c.queue.Add(key)
		}
	}
	if _, err := inf.Identities.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n := oldObj.(*v1alpha1.TerraformClusterIdentity), newObj.(*v1alpha1.TerraformClusterIdentity)
			// Its own status writes are not a change (S3).
			if o.Generation != n.Generation || !equality.Semantic.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) {
				enqueue(newObj)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if id, ok := loop.Unwrap(obj).(*v1alpha1.TerraformClusterIdentity); ok {
				c.written.Forget(id.UID)
			}
			enqueue(obj)
		},
	}); err != nil {
		return nil, err
	}
	// A mirror that changes, or a Job that starts or ends, changes its
	// identity's status (S2, section 13, C5): enqueue the identity its
	// captf.io/identity annotation names, coalescing bursts.
	byAnnotation := func(obj interface{}) {
		if m, ok := loop.Unwrap(obj).(metav1.Object); ok {
			c.EnqueueAfter(m.GetAnnotations()[v1alpha1.AnnotationIdentity], mirrorEventDelay)
		}
	}
	for _, informer := range []cache.SharedIndexInformer{inf.Mirrors.Informer(), inf.Jobs.Informer()} {
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: byAnnotation,
			UpdateFunc: func(oldObj, newObj interface{}) {
				if oldObj.(metav1.Object).GetResourceVersion() != newObj.(metav1.Object).GetResourceVersion() {
					byAnnotation(newObj)
				}
			},
			DeleteFunc: byAnnotation,
		}); err != nil {
			return nil, err
		}
	}
	// A relabelled namespace may no longer be allowed by identities that
	// have mirrors there (V5).
	if _, err := inf.Namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n := oldObj.(*corev1.Namespace), newObj.(*corev1.Namespace)
			if equality.Semantic.DeepEqual(o.Labels, n.Labels) {
				return
			}
			objs, err := inf.Mirrors.Informer().GetIndexer().ByIndex(cache.NamespaceIndex, n.Name)
			if err != nil {
				utilruntime.HandleError(err)
				return
			}
			for _, m := range objs {
				c.Enqueue(m.(*corev1.Secret).Annotations[v1alpha1.AnnotationIdentity])
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "identity" }

// Enqueue adds an identity to the queue.
func (c *Controller) Enqueue(identity string) {
	if identity != "" {
		c.queue.Add(cache.ObjectName{Name: identity})
	}
}

// EnqueueAfter adds an identity to the queue after delay.
func (c *Controller) EnqueueAfter(identity string, delay time.Duration) {
	if identity != "" {
		c.queue.AddAfter(cache.ObjectName{Name: identity}, delay)
	}
}

// Run processes the queue until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithName("identity")
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting controller", "workers", workers, "resync", c.opts.Resync)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	loop.Run(ctx, c.queue, workers, c.sync)
	logger.Info("Stopped controller")
}

// sync reconciles one identity's status.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	name := key.Name
	logger := klog.FromContext(ctx).WithValues("identity", name)
	ctx = klog.NewContext(ctx, logger)
	identity, err := c.identities.Get(name)
	if apierrors.IsNotFound(err) {
		return c.removeAll(ctx, name)
	}
	if err != nil {
		return err
	}
	identity = identity.DeepCopy()
	before := identity.Status.DeepCopy()
	now := c.clock.Now()

	ref := identity.Spec.SecretRef
	src, err := c.source.Get(ctx, c.source.Begin(), ref.Namespace, ref.Name)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		// B8: revocation never waits on the source.
		readErr := fmt.Errorf("reading source Secret %s/%s: %w", ref.Namespace, ref.Name, err)
		return errors.Join(readErr, c.revokeDisallowed(ctx, identity))
	}
	hash := ""
	var problem *credentials.SourceProblem
	switch {
	case !found:
		setCondition(&identity.Status.Conditions, identity.Generation, now, string(v1alpha1.ConditionReady), metav1.ConditionFalse, string(v1alpha1.ReasonSecretNotFound),
			fmt.Sprintf("Secret %s/%s does not exist", ref.Namespace, ref.Name))
	default:
		hash = credentials.SourceHash(src.Data)
		// Section 14: C2 refused sources, C1 consent, C3 required keys.
		problem = credentials.CheckSource(src, name, identity.Spec.RequiredKeys, c.opts.RequireSourceConsent)
		if problem != nil {
			setCondition(&identity.Status.Conditions, identity.Generation, now, string(v1alpha1.ConditionReady), metav1.ConditionFalse, string(problem.Reason), problem.Message)
		} else {
			setCondition(&identity.Status.Conditions, identity.Generation, now, string(v1alpha1.ConditionReady), metav1.ConditionTrue, string(v1alpha1.ReasonSecretFound),
				fmt.Sprintf("Secret %s/%s exists", ref.Namespace, ref.Name))
		}
		c.setCredentialsValid(identity, credentials.CheckHygiene(src.Data), now)
	}

	objs, err := c.mirrorIndexer.ByIndex(index.MirrorIdentity, name)
	if err != nil {
		return err
	}
	var namespaces []string
	var counts v1alpha1.MirrorCounts
	stale := map[string]bool{}
	for _, o := range objs {
		m := o.(*corev1.Secret)
		if m.DeletionTimestamp != nil || m.Name != credentials.MirrorName(name) {
			continue
		}
		if m.Namespace == ref.Namespace && m.Name == ref.Name {
			// V6: an identity pointed at its own mirror (refused, C2) must
			// still never delete its source.
			continue
		}
		if !c.allowed(identity, m.Namespace) {
			// V5: revoked even when no user there reconciles.
			if err := c.deleteMirror(ctx, m, "TerraformClusterIdentity "+name+" no longer allows the namespace"); err != nil {
				return err
			}
			continue
		}
		if problem.RevokesMirrors() {
			// C1, C2: a source that may not be used is revoked everywhere.
			if err := c.deleteMirror(ctx, m, string(problem.Reason)); err != nil {
				return err
			}
			continue
		}
		namespaces = append(namespaces, m.Namespace)
		// B2: a look-alike without a live user stays in status.namespaces
		// (S2, A4) but never counts as one of the identity's mirrors.
		if live, err := c.hasLiveUser(m, name); err != nil {
			return err
		} else if !live {
			continue
		}
		counts.Total++
		switch {
		case !found:
		case m.Annotations[v1alpha1.AnnotationSourceHash] == hash:
			counts.Current++
		default:
			counts.Stale++
			stale[m.Namespace] = true
			// S4: the users rewrite it from a fresh read.
			c.enqueueOwners(m)
		}
	}
	conflicted := c.conflicts.Namespaces(name)
	counts.Conflicted = int32(len(conflicted))
	c.recordStaleness(name, stale, now)

	sort.Strings(namespaces)
	if len(namespaces) > maxNamespaces {
		namespaces = namespaces[:maxNamespaces]
	}
	identity.Status.Namespaces = namespaces
	identity.Status.Mirrors = &counts
	c.setMirrorsCurrent(identity, found, counts, conflicted, now)
	if err := c.setRotation(identity, found, hash, counts, now); err != nil {
		return err
	}
	c.emitEvents(identity, before)
	if c.written.NeedsWrite(identity.UID, *before, identity.Status) {
		stored, err := c.captf.InfrastructureV1alpha1().TerraformClusterIdentities().UpdateStatus(ctx, identity, metav1.UpdateOptions{FieldManager: fieldManager})
		if err != nil {
			return fmt.Errorf("updating status: %w", err)
		}
		c.written.Record(identity.UID, *stored.Status.DeepCopy())
	}
	// S1: re-read periodically; sooner while not Ready (for any reason).
	next := c.opts.Resync
	if !meta.IsStatusConditionTrue(identity.Status.Conditions, string(v1alpha1.ConditionReady)) && notReadyResync < next {
		next = notReadyResync
	}
	c.queue.AddAfter(key, next)
	return nil
}

// setCredentialsValid sets the C4 hygiene report: key names by category,
// never values. It never refuses anything.
func (c *Controller) setCredentialsValid(identity *v1alpha1.TerraformClusterIdentity, h credentials.Hygiene, now time.Time) {
	status, reason := metav1.ConditionTrue, v1alpha1.ReasonKeysValid
	if !h.OK() {
		status, reason = metav1.ConditionFalse, v1alpha1.ReasonKeysNeedAttention
	}
	setCondition(&identity.Status.Conditions, identity.Generation, now, string(v1alpha1.ConditionCredentialsValid), status, string(reason), h.Message())
}

// setRotation sets status.rotation and RotationComplete (C5): complete once
// every mirror carries the current hash and no running Job of the identity
// started with an older one. Jobs are read from the Job cache.
func (c *Controller) setRotation(identity *v1alpha1.TerraformClusterIdentity, found bool, hash string, counts v1alpha1.MirrorCounts, now time.Time) error {
	objs, err := c.jobIndexer.ByIndex(index.JobIdentity, identity.Name)
	if err != nil {
		return err
	}
	var previous []string
	for _, o := range objs {
		j := o.(*batchv1.Job)
		if jobs.Finished(j) || !found {
			continue
		}
		// B2: only a Job a live user in an allowed namespace controls.
		ref := metav1.GetControllerOfNoCopy(j)
		if ref == nil || !c.allowed(identity, j.Namespace) {
			continue
		}
		if live, err := c.resolver.LiveUser(j.Namespace, *ref, identity.Name); err != nil {
			return err
		} else if !live {
			continue
		}
		if h := jobs.SourceHashOf(j); h != "" && h != hash {
			previous = append(previous, j.Namespace+"/"+j.Name)
		}
	}
	sort.Strings(previous)
	identity.Status.Rotation = &v1alpha1.RotationStatus{
		MirrorsCurrent:            counts.Current,
		MirrorsStale:              counts.Stale,
		JobsOnPreviousCredentials: int32(len(previous)),
	}
	set := func(status metav1.ConditionStatus, reason v1alpha1.ConditionReason, msg string) {
		setCondition(&identity.Status.Conditions, identity.Generation, now, string(v1alpha1.ConditionRotationComplete), status, string(reason), msg)
	}
	ref := identity.Spec.SecretRef
	switch {
	case !found:
		set(metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale, fmt.Sprintf("source Secret %s/%s does not exist: the current credentials are unknown", ref.Namespace, ref.Name))
	case counts.Stale > 0:
		set(metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale, fmt.Sprintf("%d of %d mirrors still carry older credentials", counts.Stale, counts.Total))
	case len(previous) > 0:
		shown := previous[:min(len(previous), 5)]
		more := ""
		if len(previous) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(previous)-len(shown))
		}
		set(metav1.ConditionFalse, v1alpha1.ReasonJobsOnPreviousCredentials, fmt.Sprintf(
			"%d running Jobs started with older credentials (%s%s): keep the old credential valid until they end", len(previous), strings.Join(shown, ", "), more))
	default:
		set(metav1.ConditionTrue, v1alpha1.ReasonRotationComplete, fmt.Sprintf(
			"all %d mirrors carry the current credentials and no running Job uses older ones: the previous credential may be revoked", counts.Total))
	}
	return nil
}

// emitEvents records one event per change of Ready (SecretFound,
// SecretNotFound, or the section 14 reason) and of the hygiene report's
// key set (C4).
func (c *Controller) emitEvents(identity *v1alpha1.TerraformClusterIdentity, before *v1alpha1.TerraformClusterIdentityStatus) {
	if b, a := meta.FindStatusCondition(before.Conditions, string(v1alpha1.ConditionReady)), meta.FindStatusCondition(identity.Status.Conditions, string(v1alpha1.ConditionReady)); a != nil &&
		(b == nil || b.Status != a.Status || b.Reason != a.Reason) {
		switch {
		case a.Status == metav1.ConditionTrue:
			c.recorder.Eventf(identity, corev1.EventTypeNormal, v1alpha1.EventSecretFound, "%s", a.Message)
		case a.Reason == string(v1alpha1.ReasonSecretNotFound):
			c.recorder.Eventf(identity, corev1.EventTypeWarning, v1alpha1.EventSecretNotFound, "%s", a.Message)
		default:
			c.recorder.Eventf(identity, corev1.EventTypeWarning, a.Reason, "%s", a.Message)
		}
	}
	if b, a := meta.FindStatusCondition(before.Conditions, string(v1alpha1.ConditionCredentialsValid)), meta.FindStatusCondition(identity.Status.Conditions, string(v1alpha1.ConditionCredentialsValid)); a != nil &&
		(b == nil || b.Message != a.Message) {
		if a.Status == metav1.ConditionFalse {
			c.recorder.Eventf(identity, corev1.EventTypeWarning, v1alpha1.EventKeysNeedAttention, "%s", a.Message)
		} else if b != nil {
			c.recorder.Eventf(identity, corev1.EventTypeNormal, v1alpha1.EventKeysValid, "%s", a.Message)
		}
	}
}

// setMirrorsCurrent sets MirrorsCurrent from the counts (section 13).
func (c *Controller) setMirrorsCurrent(identity *v1alpha1.TerraformClusterIdentity, found bool, counts v1alpha1.MirrorCounts, conflicted []string, now time.Time) {
	set := func(status metav1.ConditionStatus, reason v1alpha1.ConditionReason, msg string) {
		setCondition(&identity.Status.Conditions, identity.Generation, now, string(v1alpha1.ConditionMirrorsCurrent), status, string(reason), msg)
	}
	ref := identity.Spec.SecretRef
	switch {
	case len(conflicted) > 0:
		set(metav1.ConditionFalse, v1alpha1.ReasonMirrorsConflicted, fmt.Sprintf("a Secret that is not a captf mirror holds the name %s in namespaces %s: rename or delete it",
			credentials.MirrorName(identity.Name), strings.Join(conflicted, ", ")))
	case !found && counts.Total > 0:
		set(metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale, fmt.Sprintf("source Secret %s/%s does not exist: %d mirrors keep the data they were last written with", ref.Namespace, ref.Name, counts.Total))
	case counts.Stale > 0:
		set(metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale, fmt.Sprintf("%d of %d mirrors differ from the source Secret %s/%s; their users are being reconciled", counts.Stale, counts.Total, ref.Namespace, ref.Name))
	default:
		set(metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent, fmt.Sprintf("all %d mirrors carry the current hash of Secret %s/%s", counts.Total, ref.Namespace, ref.Name))
	}
}

// allowed reports whether identity allows namespace (N1-N6).
func (c *Controller) allowed(identity *v1alpha1.TerraformClusterIdentity, namespace string) bool {
	return credentials.NamespaceAllowed(identity.Spec.AllowedNamespaces, namespace, func() (labels.Set, bool) {
		n, err := c.namespaces.Get(namespace)
		if err != nil {
			return nil, false
		}
		return n.Labels, true
	})
}

// hasLiveUser reports whether mirror m has an owner reference to a live
// user of identity (B2).
func (c *Controller) hasLiveUser(m *corev1.Secret, identity string) (bool, error) {
	for _, ref := range m.OwnerReferences {
		live, err := c.resolver.LiveUser(m.Namespace, ref, identity)
		if err != nil || live {
			return live, err
		}
	}
	return false, nil
}

// revokeDisallowed deletes identity's mirrors in namespaces it does not
// allow (V5); it needs nothing from the source, so it runs when the source
// cannot be read as well (B8).
func (c *Controller) revokeDisallowed(ctx context.Context, identity *v1alpha1.TerraformClusterIdentity) error {
	objs, err := c.mirrorIndexer.ByIndex(index.MirrorIdentity, identity.Name)
	if err != nil {
		return err
	}
	ref := identity.Spec.SecretRef
	var errs []error
	for _, o := range objs {
		m := o.(*corev1.Secret)
		if m.Name != credentials.MirrorName(identity.Name) || (m.Namespace == ref.Namespace && m.Name == ref.Name) || c.allowed(identity, m.Namespace) {
			continue
		}
		errs = append(errs, c.deleteMirror(ctx, m, "TerraformClusterIdentity "+identity.Name+" no longer allows the namespace"))
	}
	return errors.Join(errs...)
}

// removeAll deletes every mirror of an identity that is gone (V5).
func (c *Controller) removeAll(ctx context.Context, name string) error {
	objs, err := c.mirrorIndexer.ByIndex(index.MirrorIdentity, name)
	if err != nil {
		return err
	}
	for _, o := range objs {
		m := o.(*corev1.Secret)
		if m.Name != credentials.MirrorName(name) {
			continue
		}
		if err := c.deleteMirror(ctx, m, "TerraformClusterIdentity "+name+" is gone"); err != nil {
			return err
		}
	}
	c.conflicts.Forget(name)
	c.recordStaleness(name, nil, c.clock.Now())
	return nil
}

// deleteMirror deletes a mirror (never a foreign Secret: the informer only
// holds labelled ones, and the UID precondition pins the one it saw).
func (c *Controller) deleteMirror(ctx context.Context, m *corev1.Secret, why string) error {
	if credentials.IsForeign(m, m.Annotations[v1alpha1.AnnotationIdentity]) || m.DeletionTimestamp != nil {
		return nil
	}
	uid := m.UID
	err := c.kube.CoreV1().Secrets(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
		return fmt.Errorf("deleting mirror %s/%s: %w", m.Namespace, m.Name, err)
	}
	metrics.MirrorWrites.WithLabelValues(metrics.WriteDeleted).Inc()
	klog.FromContext(ctx).Info("Deleted mirror", "mirror", klog.KObj(m), "reason", why)
	return nil
}

// recordStaleness updates captf_mirror_staleness_seconds: the age of the
// oldest mirror seen stale and not yet seen current again.
func (c *Controller) recordStaleness(identity string, stale map[string]bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.staleSince[identity]
	next := map[string]time.Time{}
	for ns := range stale {
		if t, ok := prev[ns]; ok {
			next[ns] = t
		} else {
			next[ns] = now
		}
	}
	if len(next) == 0 {
		delete(c.staleSince, identity)
	} else {
		c.staleSince[identity] = next
	}
	var oldest time.Time
	for _, byNS := range c.staleSince {
		for _, t := range byNS {
			if oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
	}
	if oldest.IsZero() {
		metrics.MirrorStaleness.Set(0)
		return
	}
	metrics.MirrorStaleness.Set(now.Sub(oldest).Seconds())
}

func setCondition(conds *[]metav1.Condition, generation int64, now time.Time, t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
}
