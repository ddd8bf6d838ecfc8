package identity

import (
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/credentials"
)

// inputs is everything one pass decides from, read before anything is
// decided so that the decision is a pure function of it (a table test).
type inputs struct {
	identity *v1alpha1.TerraformClusterIdentity
	// source is the source Secret as read uncached; nil when it does not
	// exist or could not be read. Shared with the source reader: read only.
	source *corev1.Secret
	// sourceUnreadable is set when the read failed with an error other
	// than NotFound: only what needs nothing from the source is decided
	// (B8).
	sourceUnreadable bool
	// mirrors are the Secrets the mirror cache indexes under the identity.
	mirrors []mirrorInput
	// jobs are the Jobs the Job cache indexes under the identity.
	jobs []jobInput
	// conflicted are the namespaces where a foreign Secret holds the
	// mirror's name (M7, recorded by the workload controller), sorted.
	conflicted     []string
	requireConsent bool
	resync         time.Duration
	now            time.Time
	// read is the ticket of the source read: a stamp taken before the
	// read began. It stamps the S4 enqueue (SPEC P1, see apply); decide
	// does not use it.
	read freshness.Stamp
}

// mirrorInput is a mirror with what the caches say about it.
type mirrorInput struct {
	secret *corev1.Secret
	// allowed: the identity allows the mirror's namespace (N1-N6).
	allowed bool
	// liveUser: an owner reference names a live user of the identity (B2).
	liveUser bool
}

// jobInput is a Job with whether it may count for C5.
type jobInput struct {
	job *batchv1.Job
	// ofLiveUser: a live user of the identity in a namespace it allows
	// controls the Job (B2); a tenant's look-alike Job does not count.
	ofLiveUser bool
}

// deletion is a mirror to delete and why (for the log line).
type deletion struct {
	mirror *corev1.Secret
	why    string
}

// outcome is what one pass decided.
type outcome struct {
	status v1alpha1.TerraformClusterIdentityStatus
	// deletions are the mirrors to revoke (V5, C1, C2).
	deletions []deletion
	// enqueue are stale mirrors whose users must rewrite them (S4).
	enqueue []*corev1.Secret
	// stale are the namespaces of stale mirrors, for
	// captf_mirror_staleness_seconds.
	stale map[string]bool
	// requeueAfter is when to re-read the source (S1).
	requeueAfter time.Duration
}

// decide computes the identity's new status and the actions of one pass.
// With the source unreadable it decides only the V5 revocations and leaves
// the status as it is (B8).
func decide(in inputs) outcome {
	id := in.identity
	out := outcome{status: *id.Status.DeepCopy(), stale: map[string]bool{}}
	if in.sourceUnreadable {
		// B8: V5 needs nothing from the source, and status.namespaces
		// follows it (S2); everything else waits for a readable source.
		scratch := outcome{status: *id.Status.DeepCopy(), stale: map[string]bool{}}
		decideMirrors(in, "", nil, &scratch)
		out.deletions = scratch.deletions
		out.status.Namespaces = scratch.status.Namespaces
		return out
	}
	found := in.source != nil
	hash := ""
	var problem *credentials.SourceProblem
	if found {
		hash = credentials.SourceHash(in.source.Data)
		// Section 14: C2 refused sources, C1 consent, C3 required keys.
		problem = credentials.CheckSource(in.source, id.Name, id.Spec.RequiredKeys, in.requireConsent)
		setCredentialsValid(&out.status, id.Generation, in.now, credentials.CheckHygiene(in.source.Data))
	}
	setReady(&out.status, id, found, problem, in.now)
	counts := decideMirrors(in, hash, problem, &out)
	counts.Conflicted = int32(len(in.conflicted))
	out.status.Mirrors = &counts
	setMirrorsCurrent(&out.status, id, found, counts, in.conflicted, in.now)
	setRotation(&out.status, id, found, counts, jobsOnPreviousCredentials(in.jobs, found, hash), in.now)
	out.requeueAfter = requeueDelay(out.status, in.resync)
	return out
}

// decideMirrors sorts the identity's mirrors into revoked (V5, C1, C2),
// listed (S2) and counted (section 13, B2), and sets status.namespaces.
func decideMirrors(in inputs, hash string, problem *credentials.SourceProblem, out *outcome) v1alpha1.MirrorCounts {
	id := in.identity
	var namespaces []string
	var counts v1alpha1.MirrorCounts
	for _, mi := range in.mirrors {
		m := mi.secret
		if m.DeletionTimestamp != nil || !isMirrorOf(id, m) {
			continue
		}
		if !mi.allowed {
			// V5: revoked even when no user there reconciles.
			out.revoke(id.Name, m, disallowedWhy(id.Name))
			continue
		}
		if problem.RevokesMirrors() {
			// C1, C2: a source that may not be used is revoked everywhere.
			out.revoke(id.Name, m, string(problem.Reason))
			continue
		}
		namespaces = append(namespaces, m.Namespace)
		// B2: a look-alike without a live user stays in status.namespaces
		// (S2, A4) but never counts as one of the identity's mirrors.
		if !mi.liveUser {
			continue
		}
		counts.Total++
		switch {
		case in.source == nil:
			// Unknown current hash: neither current nor stale.
		case m.Annotations[v1alpha1.AnnotationSourceHash] == hash:
			counts.Current++
		default:
			counts.Stale++
			out.stale[m.Namespace] = true
			// S4: the users rewrite it from a fresh read.
			out.enqueue = append(out.enqueue, m)
		}
	}
	sort.Strings(namespaces)
	if len(namespaces) > maxNamespaces {
		namespaces = namespaces[:maxNamespaces]
	}
	out.status.Namespaces = namespaces
	return counts
}

// isMirrorOf reports whether m, indexed under the identity, holds its
// mirror's name and is not its own source (V6: an identity pointed at its
// own mirror is refused, C2, but that mirror, its source, is never deleted).
func isMirrorOf(id *v1alpha1.TerraformClusterIdentity, m *corev1.Secret) bool {
	ref := id.Spec.SecretRef
	return m.Name == credentials.MirrorName(id.Name) &&
		!(m.Namespace == ref.Namespace && m.Name == ref.Name)
}

// revoke adds mirror m of identity to the deletions unless it is already
// being deleted or is not provably the identity's mirror: a foreign Secret
// is never deleted (M7), even where the identity's access is revoked.
func (o *outcome) revoke(identity string, m *corev1.Secret, why string) {
	if m.DeletionTimestamp != nil || credentials.IsForeign(m, identity) {
		return
	}
	o.deletions = append(o.deletions, deletion{m, why})
}

// deletionsForGone revokes every mirror of an identity that is gone (V5);
// with the identity gone there is no source reference left to protect.
func deletionsForGone(name string, mirrors []*corev1.Secret) []deletion {
	var out outcome
	for _, m := range mirrors {
		if m.Name == credentials.MirrorName(name) {
			out.revoke(name, m, "TerraformClusterIdentity "+name+" is gone")
		}
	}
	return out.deletions
}

func disallowedWhy(name string) string {
	return "TerraformClusterIdentity " + name + " no longer allows the namespace"
}

// jobsOnPreviousCredentials returns, sorted, the running Jobs of live users
// that started with credentials other than the current hash (C5). With no
// source there is no current hash, so none is judged.
func jobsOnPreviousCredentials(js []jobInput, found bool, hash string) []string {
	if !found {
		return nil
	}
	var previous []string
	for _, ji := range js {
		j := ji.job
		if !ji.ofLiveUser || jobs.Finished(j) {
			continue
		}
		if h := jobs.SourceHashOf(j); h != "" && h != hash {
			previous = append(previous, j.Namespace+"/"+j.Name)
		}
	}
	sort.Strings(previous)
	return previous
}

// requeueDelay is S1: re-read every --identity-resync; sooner while not
// Ready (for any reason), so a fixed source is seen quickly.
func requeueDelay(st v1alpha1.TerraformClusterIdentityStatus, resync time.Duration) time.Duration {
	if !meta.IsStatusConditionTrue(st.Conditions, string(v1alpha1.ConditionReady)) && notReadyResync < resync {
		return notReadyResync
	}
	return resync
}

// setReady sets Ready: SecretNotFound (S1), the section 14 reason of a
// source that may not be used (C1-C3), or SecretFound.
func setReady(st *v1alpha1.TerraformClusterIdentityStatus, id *v1alpha1.TerraformClusterIdentity, found bool, problem *credentials.SourceProblem, now time.Time) {
	set := func(status metav1.ConditionStatus, reason v1alpha1.ConditionReason, msg string) {
		setCondition(&st.Conditions, id.Generation, now, string(v1alpha1.ConditionReady), status, string(reason), msg)
	}
	ref := id.Spec.SecretRef
	switch {
	case !found:
		set(metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound, fmt.Sprintf("Secret %s/%s does not exist", ref.Namespace, ref.Name))
	case problem != nil:
		set(metav1.ConditionFalse, problem.Reason, problem.Message)
	default:
		set(metav1.ConditionTrue, v1alpha1.ReasonSecretFound, fmt.Sprintf("Secret %s/%s exists", ref.Namespace, ref.Name))
	}
}

// setCredentialsValid sets the C4 hygiene report: key names by category,
// never values. It never refuses anything.
func setCredentialsValid(st *v1alpha1.TerraformClusterIdentityStatus, generation int64, now time.Time, h credentials.Hygiene) {
	status, reason := metav1.ConditionTrue, v1alpha1.ReasonKeysValid
	if !h.OK() {
		status, reason = metav1.ConditionFalse, v1alpha1.ReasonKeysNeedAttention
	}
	setCondition(&st.Conditions, generation, now, string(v1alpha1.ConditionCredentialsValid), status, string(reason), h.Message())
}

// setMirrorsCurrent sets MirrorsCurrent from the counts (section 13).
func setMirrorsCurrent(st *v1alpha1.TerraformClusterIdentityStatus, id *v1alpha1.TerraformClusterIdentity, found bool, counts v1alpha1.MirrorCounts, conflicted []string, now time.Time) {
	set := func(status metav1.ConditionStatus, reason v1alpha1.ConditionReason, msg string) {
		setCondition(&st.Conditions, id.Generation, now, string(v1alpha1.ConditionMirrorsCurrent), status, string(reason), msg)
	}
	ref := id.Spec.SecretRef
	switch {
	case len(conflicted) > 0:
		set(metav1.ConditionFalse, v1alpha1.ReasonMirrorsConflicted, fmt.Sprintf("a Secret that is not a captf mirror holds the name %s in namespaces %s: rename or delete it",
			credentials.MirrorName(id.Name), strings.Join(conflicted, ", ")))
	case !found && counts.Total > 0:
		set(metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale, fmt.Sprintf("source Secret %s/%s does not exist: %d mirrors keep the data they were last written with", ref.Namespace, ref.Name, counts.Total))
	case counts.Stale > 0:
		set(metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale, fmt.Sprintf("%d of %d mirrors differ from the source Secret %s/%s; their users are being reconciled", counts.Stale, counts.Total, ref.Namespace, ref.Name))
	default:
		set(metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent, fmt.Sprintf("all %d mirrors carry the current hash of Secret %s/%s", counts.Total, ref.Namespace, ref.Name))
	}
}

// setRotation sets status.rotation and RotationComplete (C5): complete once
// every mirror carries the current hash and no running Job of the identity
// started with an older one (previous).
func setRotation(st *v1alpha1.TerraformClusterIdentityStatus, id *v1alpha1.TerraformClusterIdentity, found bool, counts v1alpha1.MirrorCounts, previous []string, now time.Time) {
	st.Rotation = &v1alpha1.RotationStatus{
		MirrorsCurrent:            counts.Current,
		MirrorsStale:              counts.Stale,
		JobsOnPreviousCredentials: int32(len(previous)),
	}
	set := func(status metav1.ConditionStatus, reason v1alpha1.ConditionReason, msg string) {
		setCondition(&st.Conditions, id.Generation, now, string(v1alpha1.ConditionRotationComplete), status, string(reason), msg)
	}
	ref := id.Spec.SecretRef
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
}

// setCondition sets one condition; meta.SetStatusCondition keeps the
// transition time when the status does not change, so now only lands on a
// transition.
func setCondition(conds *[]metav1.Condition, generation int64, now time.Time, t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
}
