package identity

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
)

// Table tests of decide, the pure part of a pass: no client, no clock, no
// cache; the verdicts gather would read (N1-N6 allowed, B2 live user) are
// given.

// decided is what a case asserts of an outcome; every field is compared.
type decided struct {
	ready          v1alpha1.ConditionReason // "" when Ready was not set
	rotation       v1alpha1.ConditionReason // "" when RotationComplete was not set
	deleted        []string                 // namespaces of the deleted mirrors, sorted
	enqueued       []string                 // namespaces of the stale mirrors whose users are enqueued (S4)
	stale          []string                 // namespaces recorded stale
	namespaces     []string                 // status.namespaces (S2)
	counts         *v1alpha1.MirrorCounts   // status.mirrors
	jobsOnPrevious int32                    // status.rotation.jobsOnPreviousCredentials (C5)
	requeue        time.Duration            // S1
}

func summarize(out outcome) decided {
	d := decided{namespaces: out.status.Namespaces, counts: out.status.Mirrors, requeue: out.requeueAfter}
	if c := meta.FindStatusCondition(out.status.Conditions, string(v1alpha1.ConditionReady)); c != nil {
		d.ready = v1alpha1.ConditionReason(c.Reason)
	}
	if c := meta.FindStatusCondition(out.status.Conditions, string(v1alpha1.ConditionRotationComplete)); c != nil {
		d.rotation = v1alpha1.ConditionReason(c.Reason)
	}
	for _, del := range out.deletions {
		d.deleted = append(d.deleted, del.mirror.Namespace)
	}
	sort.Strings(d.deleted)
	for _, m := range out.enqueue {
		d.enqueued = append(d.enqueued, m.Namespace)
	}
	for ns := range out.stale {
		d.stale = append(d.stale, ns)
	}
	sort.Strings(d.stale)
	if out.status.Rotation != nil {
		d.jobsOnPrevious = out.status.Rotation.JobsOnPreviousCredentials
	}
	return d
}

// live is a mirror of identityName in namespace, in an allowed namespace,
// owned by a live user.
func live(namespace string, data map[string][]byte) mirrorInput {
	return mirrorInput{secret: newMirror(identityName, namespace, data), allowed: true, liveUser: true}
}

func TestDecide(t *testing.T) {
	old := map[string][]byte{"API_KEY": []byte("0ld-VALUE-x1")}
	oldHash := credentials.SourceHash(old)
	allCurrent := func(n int32) *v1alpha1.MirrorCounts { return &v1alpha1.MirrorCounts{Total: n, Current: n} }

	disallowed := live("ns-gone", sourceData())
	disallowed.allowed = false
	lookalike := live("ns-forged", old)
	lookalike.liveUser = false
	deleting := live("ns-deleting", sourceData())
	deleting.secret.DeletionTimestamp = &metav1.Time{Time: epoch}
	foreign := live("ns-foreign", sourceData())
	foreign.allowed = false
	delete(foreign.secret.Annotations, v1alpha1.AnnotationIdentity)
	wrongName := live("ns-wrongname", sourceData())
	wrongName.secret.Name = "captf-creds-something-else"
	// V6: the identity's source is its own mirror in ns-own (refused, C2).
	ownSource := live("ns-own", sourceData())
	ownID := newIdentity(identityName, allowAll())
	ownID.Spec.SecretRef = v1alpha1.SecretReference{Namespace: "ns-own", Name: mirrorName}
	ownSrc := ownSource.secret.DeepCopy()
	ownSrc.Annotations[v1alpha1.AnnotationIdentity] = "other"

	runningOld := jobInput{job: newIdentityJob("ns-a", "c-ns-a", identityName, oldHash, ""), ofLiveUser: true}
	finishedOld := jobInput{job: newIdentityJob("ns-a", "c-done", identityName, oldHash, batchv1.JobComplete), ofLiveUser: true}
	forgedOld := jobInput{job: newIdentityJob("ns-a", "c-forged", identityName, oldHash, "")}
	runningCurrent := jobInput{job: newIdentityJob("ns-a", "c-cur", identityName, credentials.SourceHash(sourceData()), ""), ofLiveUser: true}

	tests := []struct {
		name     string
		identity *v1alpha1.TerraformClusterIdentity
		source   *corev1.Secret
		// unreadable: the source read failed other than NotFound (B8).
		unreadable bool
		consent    bool
		mirrors    []mirrorInput
		jobs       []jobInput
		conflicted []string
		want       decided
	}{{
		name: "S1 source found, all current", source: newSource(sourceData()),
		mirrors: []mirrorInput{live("ns-b", sourceData()), live("ns-a", sourceData())},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonRotationComplete,
			namespaces: []string{"ns-a", "ns-b"}, counts: allCurrent(2), requeue: resync},
	}, {
		name:    "S1 source not found: not Ready, requeued at 30s, mirrors neither current nor stale",
		mirrors: []mirrorInput{live("ns-a", old)},
		want: decided{ready: v1alpha1.ReasonSecretNotFound, rotation: v1alpha1.ReasonMirrorsStale,
			namespaces: []string{"ns-a"}, counts: &v1alpha1.MirrorCounts{Total: 1}, requeue: notReadyResync},
	}, {
		name: "C1 not opted in: every mirror revoked", source: newSource(sourceData()), consent: consentOn,
		mirrors: []mirrorInput{live("ns-a", sourceData()), live("ns-b", old)},
		want: decided{ready: v1alpha1.ReasonNotOptedIn, rotation: v1alpha1.ReasonRotationComplete,
			deleted: []string{"ns-a", "ns-b"}, counts: &v1alpha1.MirrorCounts{}, requeue: notReadyResync},
	}, {
		name: "C1 opted in", source: consenting(newSource(sourceData()), identityName), consent: consentOn,
		mirrors: []mirrorInput{live("ns-a", sourceData())},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonRotationComplete,
			namespaces: []string{"ns-a"}, counts: allCurrent(1), requeue: resync},
	}, {
		name: "C2 refused source: every mirror revoked", source: saTokenSource(),
		mirrors: []mirrorInput{live("ns-a", sourceData())},
		want: decided{ready: v1alpha1.ReasonSourceRefused, rotation: v1alpha1.ReasonRotationComplete,
			deleted: []string{"ns-a"}, counts: &v1alpha1.MirrorCounts{}, requeue: notReadyResync},
	}, {
		name:     "V6 with C2: the identity's own source is never deleted",
		identity: ownID, source: ownSrc,
		mirrors: []mirrorInput{ownSource, live("ns-b", sourceData())},
		want: decided{ready: v1alpha1.ReasonSourceRefused, rotation: v1alpha1.ReasonRotationComplete,
			deleted: []string{"ns-b"}, counts: &v1alpha1.MirrorCounts{}, requeue: notReadyResync},
	}, {
		name:     "C3 incomplete: not Ready, mirrors kept and counted",
		identity: withRequiredKeys(newIdentity(identityName, allowAll()), "MISSING_KEY"), source: newSource(sourceData()),
		mirrors: []mirrorInput{live("ns-a", sourceData())},
		want: decided{ready: v1alpha1.ReasonCredentialsIncomplete, rotation: v1alpha1.ReasonRotationComplete,
			namespaces: []string{"ns-a"}, counts: allCurrent(1), requeue: notReadyResync},
	}, {
		name: "V5: a mirror in a namespace no longer allowed is deleted and not listed", source: newSource(sourceData()),
		mirrors: []mirrorInput{live("ns-a", sourceData()), disallowed},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonRotationComplete,
			deleted: []string{"ns-gone"}, namespaces: []string{"ns-a"}, counts: allCurrent(1), requeue: resync},
	}, {
		name: "M7: a foreign Secret is never deleted; deleting and wrongly named ones are skipped", source: newSource(sourceData()),
		mirrors: []mirrorInput{foreign, deleting, wrongName},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonRotationComplete,
			counts: &v1alpha1.MirrorCounts{}, requeue: resync},
	}, {
		name: "S4: a stale mirror's users are enqueued and it is recorded stale", source: newSource(sourceData()),
		mirrors: []mirrorInput{live("ns-a", sourceData()), live("ns-b", old)},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonMirrorsStale,
			enqueued: []string{"ns-b"}, stale: []string{"ns-b"}, namespaces: []string{"ns-a", "ns-b"},
			counts: &v1alpha1.MirrorCounts{Total: 2, Current: 1, Stale: 1}, requeue: resync},
	}, {
		name: "B2: a look-alike is listed but not counted, and nobody is enqueued for it", source: newSource(sourceData()),
		mirrors: []mirrorInput{live("ns-a", sourceData()), lookalike},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonRotationComplete,
			namespaces: []string{"ns-a", "ns-forged"}, counts: allCurrent(1), requeue: resync},
	}, {
		name: "section 13: recorded conflicts are counted", source: newSource(sourceData()),
		mirrors: []mirrorInput{live("ns-a", sourceData())}, conflicted: []string{"ns-y", "ns-z"},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonRotationComplete,
			namespaces: []string{"ns-a"}, counts: &v1alpha1.MirrorCounts{Total: 1, Current: 1, Conflicted: 2}, requeue: resync},
	}, {
		name: "C5: a running Job of a live user on older credentials holds RotationComplete False", source: newSource(sourceData()),
		mirrors: []mirrorInput{live("ns-a", sourceData())},
		jobs:    []jobInput{runningOld, finishedOld, forgedOld, runningCurrent},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonJobsOnPreviousCredentials,
			namespaces: []string{"ns-a"}, counts: allCurrent(1), jobsOnPrevious: 1, requeue: resync},
	}, {
		name: "C5: finished, forged and current Jobs do not count", source: newSource(sourceData()),
		jobs: []jobInput{finishedOld, forgedOld, runningCurrent},
		want: decided{ready: v1alpha1.ReasonSecretFound, rotation: v1alpha1.ReasonRotationComplete,
			counts: &v1alpha1.MirrorCounts{}, requeue: resync},
	}, {
		name: "C5: without a source no Job is judged", jobs: []jobInput{runningOld},
		want: decided{ready: v1alpha1.ReasonSecretNotFound, rotation: v1alpha1.ReasonMirrorsStale,
			counts: &v1alpha1.MirrorCounts{}, requeue: notReadyResync},
	}, {
		name:       "B8: source unreadable: only the V5 revocations, status untouched",
		unreadable: true, consent: consentOn,
		mirrors: []mirrorInput{live("ns-a", old), disallowed, foreign, ownSource},
		jobs:    []jobInput{runningOld}, conflicted: []string{"ns-z"},
		want: decided{deleted: []string{"ns-gone"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.identity
			if id == nil {
				id = newIdentity(identityName, allowAll())
			}
			pristine := id.DeepCopy()
			in := inputs{identity: id, source: tc.source, sourceUnreadable: tc.unreadable, mirrors: tc.mirrors,
				jobs: tc.jobs, conflicted: tc.conflicted, requireConsent: tc.consent, resync: resync, now: epoch}

			out := decide(in)

			require.Equal(t, tc.want, summarize(out))
			require.True(t, equality.Semantic.DeepEqual(pristine, id), "decide must not modify its inputs")
			for _, d := range out.deletions {
				require.NotEmpty(t, d.why, "every deletion says why (log)")
			}
		})
	}
}

// S1: the requeue is --identity-resync when Ready; while not Ready, 30s or
// the resync when shorter.
func TestDecideRequeue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resync time.Duration
		source bool
		want   time.Duration
	}{
		{"Ready", resync, true, resync},
		{"not Ready", resync, false, notReadyResync},
		{"not Ready, shorter resync", 10 * time.Second, false, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := inputs{identity: newIdentity(identityName, allowAll()), resync: tc.resync, now: epoch}
			if tc.source {
				in.source = newSource(sourceData())
			}
			require.Equal(t, tc.want, decide(in).requeueAfter)
		})
	}
}

// S2: status.namespaces is bounded at 1000 (the first, sorted); the count
// covers every mirror.
func TestDecideNamespacesBounded(t *testing.T) {
	in := inputs{identity: newIdentity(identityName, allowAll()), source: newSource(sourceData()), resync: resync, now: epoch}
	for i := maxNamespaces + 4; i >= 0; i-- {
		in.mirrors = append(in.mirrors, live(fmt.Sprintf("ns-%04d", i), sourceData()))
	}

	out := decide(in)

	require.Len(t, out.status.Namespaces, maxNamespaces)
	require.Equal(t, "ns-0000", out.status.Namespaces[0])
	require.Equal(t, fmt.Sprintf("ns-%04d", maxNamespaces-1), out.status.Namespaces[maxNamespaces-1])
	require.Equal(t, int32(maxNamespaces+5), out.status.Mirrors.Total)
}

// C5: RotationComplete names at most five of the Jobs still on older
// credentials and counts the rest.
func TestDecideRotationMessage(t *testing.T) {
	in := inputs{identity: newIdentity(identityName, allowAll()), source: newSource(sourceData()), resync: resync, now: epoch}
	for i := range 7 {
		in.jobs = append(in.jobs, jobInput{job: newIdentityJob("ns-a", fmt.Sprintf("c-%d", i), identityName, "old", ""), ofLiveUser: true})
	}

	out := decide(in)

	c := meta.FindStatusCondition(out.status.Conditions, string(v1alpha1.ConditionRotationComplete))
	require.NotNil(t, c)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Contains(t, c.Message, "7 running Jobs")
	require.Contains(t, c.Message, "ns-a/")
	require.Contains(t, c.Message, "and 2 more")
	require.Equal(t, &v1alpha1.RotationStatus{JobsOnPreviousCredentials: 7}, out.status.Rotation)
}

// V5: every mirror of an identity that is gone is deleted, except foreign
// Secrets (M7), ones already being deleted, and other names.
func TestDeletionsForGone(t *testing.T) {
	a := newMirror(identityName, "ns-a", sourceData())
	b := newMirror(identityName, "ns-b", sourceData())
	deleting := newMirror(identityName, "ns-d", sourceData())
	deleting.DeletionTimestamp = &metav1.Time{Time: epoch}
	foreign := newMirror(identityName, "ns-f", sourceData())
	foreign.Type = corev1.SecretTypeDockerConfigJson
	other := newMirror(identityName, "ns-o", sourceData())
	other.Name = "captf-creds-something-else"

	var got []string
	for _, d := range deletionsForGone(identityName, []*corev1.Secret{a, b, deleting, foreign, other}) {
		got = append(got, d.mirror.Namespace)
		require.Contains(t, d.why, "is gone")
	}
	require.Equal(t, []string{"ns-a", "ns-b"}, got)
}
