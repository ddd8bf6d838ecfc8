package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/mirrors"
	"github.com/captf/captf/pkg/controllers/source"
	"github.com/captf/captf/pkg/credentials"
)

// sync reconciles one identity: gather, decide, apply, write.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	name := key.Name
	logger := klog.FromContext(ctx).WithValues("identity", name)
	ctx = klog.NewContext(ctx, logger)
	identity, err := c.identities.Get(name)
	if apierrors.IsNotFound(err) {
		if err := c.removeAll(ctx, name); err != nil {
			return err
		}
		// Gone and cleaned up: forget its key (B15). Its status record
		// and conflicts went in removeAll.
		c.queue.Drop(key)
		return nil
	}
	if err != nil {
		return err
	}
	identity = identity.DeepCopy()
	before := identity.Status.DeepCopy()

	in, readErr, err := c.gather(ctx, identity, c.ticket(key))
	if err != nil {
		return err
	}
	out := decide(in)
	if readErr != nil {
		// B8: revocation never waits on the source; the read error makes
		// the pass retry, and nothing else is decided without the source
		// but that status.namespaces no longer lists what was revoked (S2).
		if err := c.deleteMirrors(ctx, out.deletions); err != nil {
			return errors.Join(readErr, err)
		}
		identity.Status = out.status
		return errors.Join(readErr, c.writeStatus(ctx, identity, before))
	}
	if err := c.apply(ctx, name, out, in.read, in.now); err != nil {
		return err
	}
	identity.Status = out.status
	c.emitEvents(identity, before)
	if err := c.writeStatus(ctx, identity, before); err != nil {
		return err
	}
	c.queue.AddAfter(key, out.requeueAfter)
	return nil
}

// ticket is the freshness a pass for key needs (SPEC P1, as for the
// workload objects): a source read that began after the key was last added
// to the queue. Every reason to look at the identity again adds the key (a
// change of it, of a mirror or Job, S1's timed requeue), so each sees a
// read at least as new as itself; the identity's start-up pass reuses the
// read its users' reconciles began, and theirs its (their workers wait
// for this controller's batch: workload.Options.StartWith). A key added again
// while this pass runs will be passed again, with its own ticket. While
// S1's timed requeue is pending the pass reads afresh: S1 reads on every
// pass of an identity, which costs O(identities).
func (c *Controller) ticket(key cache.ObjectName) source.Ticket {
	if c.queue.Pending(key) {
		return c.source.Begin()
	}
	return c.queue.AddedAt(key)
}

// gather reads everything decide needs: the source uncached (S1), the
// mirrors and Jobs from the caches with whether their namespace is allowed
// and a live user owns them (B2), and the recorded conflicts (M7). A source
// that cannot be read is readErr, not err: the mirrors are still gathered
// so that the V5 revocations happen (B8).
func (c *Controller) gather(ctx context.Context, identity *v1alpha1.TerraformClusterIdentity, ticket source.Ticket) (in inputs, readErr, err error) {
	in = inputs{identity: identity, requireConsent: c.opts.RequireSourceConsent, resync: c.opts.Resync, now: c.clock.Now(),
		read: ticket}
	ref := identity.Spec.SecretRef
	src, err := c.source.Get(ctx, in.read, ref.Namespace, ref.Name)
	switch {
	case err == nil:
		in.source = src
	case !apierrors.IsNotFound(err):
		in.sourceUnreadable = true
		readErr = fmt.Errorf("reading source Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if in.mirrors, err = c.gatherMirrors(identity, !in.sourceUnreadable); err != nil {
		return in, readErr, err
	}
	if in.sourceUnreadable {
		return in, readErr, nil
	}
	if in.jobs, err = c.gatherJobs(identity); err != nil {
		return in, nil, err
	}
	in.conflicted = c.conflicts.Namespaces(identity.Name)
	return in, nil, nil
}

// gatherMirrors lists the identity's mirrors with whether their namespace
// is allowed and, when withUsers, whether a live user owns them (B2; only
// asked of the mirrors that can count).
func (c *Controller) gatherMirrors(identity *v1alpha1.TerraformClusterIdentity, withUsers bool) ([]mirrorInput, error) {
	objs, err := c.mirrorIndexer.ByIndex(index.MirrorIdentity, identity.Name)
	if err != nil {
		return nil, err
	}
	out := make([]mirrorInput, 0, len(objs))
	for _, o := range objs {
		mi := mirrorInput{secret: o.(*corev1.Secret)}
		mi.allowed = c.allowed(identity, mi.secret.Namespace)
		if withUsers && mi.allowed && mi.secret.DeletionTimestamp == nil && isMirrorOf(identity, mi.secret) {
			if mi.liveUser, err = c.hasLiveUser(mi.secret, identity.Name); err != nil {
				return nil, err
			}
		}
		out = append(out, mi)
	}
	return out, nil
}

// gatherJobs lists the identity's Jobs with whether a live user in an
// allowed namespace controls them (B2, C5).
func (c *Controller) gatherJobs(identity *v1alpha1.TerraformClusterIdentity) ([]jobInput, error) {
	objs, err := c.jobIndexer.ByIndex(index.JobIdentity, identity.Name)
	if err != nil {
		return nil, err
	}
	out := make([]jobInput, 0, len(objs))
	for _, o := range objs {
		ji := jobInput{job: o.(*batchv1.Job)}
		if ref := metav1.GetControllerOfNoCopy(ji.job); ref != nil && c.allowed(identity, ji.job.Namespace) {
			if ji.ofLiveUser, err = c.resolver.LiveUser(ji.job.Namespace, *ref, identity.Name); err != nil {
				return nil, err
			}
		}
		out = append(out, ji)
	}
	return out, nil
}

// apply carries out what decide chose besides the status: the stale
// mirrors' users are enqueued (S4) and the staleness gauge updated even when
// a deletion fails, since neither depends on it; a failed deletion fails the
// pass before any status is written, so it is retried.
//
// The users are enqueued as one batch stamped read, the ticket this pass
// read the source with (taken before that read began), not each at the
// moment it is added. They are enqueued because their mirrors are stale
// against that read, R, so by P1's freshness rule any read that began
// after the ticket is fresh enough for them: the pass itself accepted any
// such read. R has completed by now and the reader keeps its latest
// completed read, so their reconciles get R or a later read; one rotation
// costs about one source GET, not one per reconcile that a fresh stamp
// (later than R) would force. A user enqueued later for a change keeps its
// later stamp and reads afresh (loop.Queue.AddStamped).
func (c *Controller) apply(ctx context.Context, name string, out outcome, read freshness.Stamp, now time.Time) error {
	if len(out.enqueue) > 0 {
		stale := make([]metav1.Object, len(out.enqueue))
		for i, m := range out.enqueue {
			stale[i] = m
		}
		c.enqueueOwners(read, stale...)
	}
	c.recordStaleness(name, out.stale, now)
	return c.deleteMirrors(ctx, out.deletions)
}

// removeAll deletes every mirror of an identity that is gone (V5) and
// forgets what the controller kept about it.
func (c *Controller) removeAll(ctx context.Context, name string) error {
	objs, err := c.mirrorIndexer.ByIndex(index.MirrorIdentity, name)
	if err != nil {
		return err
	}
	ms := make([]*corev1.Secret, 0, len(objs))
	for _, o := range objs {
		ms = append(ms, o.(*corev1.Secret))
	}
	if err := c.deleteMirrors(ctx, deletionsForGone(name, ms)); err != nil {
		return err
	}
	c.conflicts.Forget(name)
	c.written.Forget(cache.ObjectName{Name: name})
	c.recordStaleness(name, nil, c.clock.Now())
	return nil
}

// deleteMirrors applies the decided revocations, all of them even when one
// fails: one failure must not keep the others' access alive (V5, C1, C2).
// The UID precondition pins the Secret that was decided on.
func (c *Controller) deleteMirrors(ctx context.Context, ds []deletion) error {
	var errs []error
	for _, d := range ds {
		if _, err := mirrors.Delete(ctx, c.kube, d.mirror, mirrors.SameUID, d.why); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeStatus writes the identity's status when it differs from both the
// status the pass began with and the last one written (S3).
func (c *Controller) writeStatus(ctx context.Context, identity *v1alpha1.TerraformClusterIdentity, before *v1alpha1.TerraformClusterIdentityStatus) error {
	key := cache.ObjectName{Name: identity.Name}
	if !c.written.NeedsWrite(key, identity.UID, *before, identity.Status) {
		return nil
	}
	stored, err := c.captf.InfrastructureV1alpha1().TerraformClusterIdentities().UpdateStatus(ctx, identity, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	c.written.Record(key, identity.UID, stored.ResourceVersion, *stored.Status.DeepCopy(), func() metav1.Object {
		if cached, err := c.identities.Get(identity.Name); err == nil {
			return cached
		}
		return nil
	})
	return nil
}

// emitEvents records one event per change of Ready (SecretFound,
// SecretNotFound, or the section 14 reason) and of the hygiene report's
// key set (C4), comparing the status the pass began with to the new one.
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

// allowed reports whether identity allows namespace (N1-N6), reading the
// namespace's labels from the cache.
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
