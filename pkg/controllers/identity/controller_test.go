package identity

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/credentials"
)

// S1, S3, section 10: Ready=True/SecretFound or False/SecretNotFound from
// an uncached read of the source, with a SecretFound/SecretNotFound event
// once per change, and no status write on an unchanged pass.
func TestSyncReady(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	f.seed(newIdentity(identityName, allowAll()))

	// No source Secret yet.
	require.NoError(t, f.sync(identityName))
	require.Equal(t, []string{"get secrets " + sourceNS + "/" + sourceName}, f.reads(), "S1: an uncached GET")
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	require.Contains(t, c.Message, sourceNS+"/"+sourceName)
	require.Equal(t, int64(1), c.ObservedGeneration)
	require.Equal(t, []string{"Warning " + v1alpha1.EventSecretNotFound}, eventReasons(f.PopEvents()))
	f.catchUp()

	// S3: the same again: no event, no write.
	f.Clock.Step(time.Minute)
	require.NoError(t, f.sync(identityName))
	require.Empty(t, f.PopEvents())
	require.Empty(t, f.writes(), "S3: unchanged, no status write")
	require.Len(t, f.reads(), 1, "S1: read again on every pass")
	f.catchUp()

	// The Secret appears.
	f.seed(newSource(sourceData()))
	require.NoError(t, f.sync(identityName))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSecretFound)
	require.Equal(t, []string{"Normal " + v1alpha1.EventSecretFound}, eventReasons(f.PopEvents()))
	require.Equal(t, []string{"update terraformclusteridentities/status " + identityName}, f.writes())
	f.catchUp()

	require.NoError(t, f.sync(identityName))
	require.Empty(t, f.PopEvents())
	require.Empty(t, f.writes())
	f.catchUp()

	// And goes away again.
	require.NoError(t, f.Kube.Tracker().Delete(secretsGR, sourceNS, sourceName))
	require.NoError(t, f.sync(identityName))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	require.Equal(t, []string{"Warning " + v1alpha1.EventSecretNotFound}, eventReasons(f.PopEvents()))
}

// S2, S4, section 13: status.namespaces lists, sorted, the namespaces
// holding a real mirror (not being deleted, the right name); status.mirrors
// counts them as current or stale against the source hash; the users of a
// stale mirror are enqueued.
func TestSyncNamespacesAndCounts(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	rotated := sourceData()
	rotated["API_KEY"] = []byte("r0tated-VALUE-x1")
	f.Secrets = append(f.Secrets, "r0tated-VALUE-x1", credentials.SourceHash(rotated))
	old := sourceData()

	beingDeleted := newMirror(identityName, "ns-e", rotated)
	beingDeleted.DeletionTimestamp = &metav1.Time{Time: epoch}
	beingDeleted.Finalizers = []string{"example.com/hold"}
	wrongName := newMirror(identityName, "ns-f", rotated)
	wrongName.Name = "captf-creds-something-else"
	f.seed(newIdentity(identityName, allowAll()), newSource(rotated),
		newMirror(identityName, "ns-c", rotated),
		newMirror(identityName, "ns-a", rotated),
		newMirror(identityName, "ns-d", old), // stale
		newMirror(identityName, "ns-b", rotated),
		beingDeleted, wrongName,
		newMirror("other", "ns-g", rotated),
	)

	require.NoError(t, f.sync(identityName))

	st := f.lastStatus()
	require.Equal(t, []string{"ns-a", "ns-b", "ns-c", "ns-d"}, st.Namespaces, "S2: sorted, real mirrors only")
	require.Equal(t, &v1alpha1.MirrorCounts{Total: 4, Current: 3, Stale: 1}, st.Mirrors)
	requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSecretFound)
	c := requireCondition(t, st, v1alpha1.ConditionMirrorsCurrent, metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale)
	require.Contains(t, c.Message, "1 of 4")
	require.Equal(t, []string{"ns-d/" + mirrorName}, f.enqueuedOwners(), "S4: only the stale mirror's users")
	require.Equal(t, []string{"update terraformclusteridentities/status " + identityName}, f.writes(), "no mirror is written (S1)")
}

// S4, P1: the users of every stale mirror are enqueued as one batch whose
// stamp was taken before the source read that found the mirrors stale, so
// that read serves all their reconciles: a rotation costs about one source
// GET, not one per reconcile that a stamp taken later would force.
func TestSyncEnqueuesStaleOwnersAsOneBatchStampedBeforeTheRead(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	rotated := sourceData()
	rotated["API_KEY"] = []byte("r0tated-VALUE-x1")
	f.Secrets = append(f.Secrets, "r0tated-VALUE-x1", credentials.SourceHash(rotated))
	old := sourceData()
	f.seed(newIdentity(identityName, allowAll()), newSource(rotated),
		newMirror(identityName, "ns-a", old),
		newMirror(identityName, "ns-b", rotated),
		newMirror(identityName, "ns-c", old),
		newMirror(identityName, "ns-d", old),
	)

	before := freshness.Now()
	require.NoError(t, f.sync(identityName))

	batches := f.ownerBatches()
	require.Len(t, batches, 1, "S4: one batch, one stamp, for every stale mirror's users")
	require.ElementsMatch(t, []string{"ns-a/" + mirrorName, "ns-c/" + mirrorName, "ns-d/" + mirrorName}, batches[0].mirrors)
	at := batches[0].at
	gets := f.sourceGetStamps()
	require.Len(t, gets, 1, "S1: one uncached read")
	require.Greater(t, at, before, "stamped in this pass")
	require.Less(t, at, gets[0], "stamped before the GET that found the mirrors stale")
	// That read is the reader's only one, so it serves a ticket exactly
	// when it began after the ticket (P1): a reconcile of the users, whose
	// ticket is the batch's stamp, reuses it and makes no GET.
	_, err := f.reader.Get(f.Ctx, at, sourceNS, sourceName)
	require.NoError(t, err)
	require.Len(t, f.sourceGetStamps(), 1, "the stamp is not later than the start of the read: the users reuse it")
}

// Section 13: MirrorsCurrent in each state.
func TestSyncMirrorsCurrent(t *testing.T) {
	tests := []struct {
		name       string
		source     bool
		mirrors    []runtime.Object
		conflicted []string
		status     metav1.ConditionStatus
		reason     v1alpha1.ConditionReason
		counts     v1alpha1.MirrorCounts
		msg        string
	}{{
		name: "all current", source: true,
		mirrors: []runtime.Object{newMirror(identityName, "ns-a", sourceData()), newMirror(identityName, "ns-b", sourceData())},
		status:  metav1.ConditionTrue, reason: v1alpha1.ReasonAllMirrorsCurrent, counts: v1alpha1.MirrorCounts{Total: 2, Current: 2},
	}, {
		name: "no mirror at all", source: true,
		status: metav1.ConditionTrue, reason: v1alpha1.ReasonAllMirrorsCurrent,
	}, {
		name: "stale", source: true,
		mirrors: []runtime.Object{newMirror(identityName, "ns-a", map[string][]byte{"API_KEY": []byte("old")})},
		status:  metav1.ConditionFalse, reason: v1alpha1.ReasonMirrorsStale, counts: v1alpha1.MirrorCounts{Total: 1, Stale: 1},
	}, {
		name: "conflicted (M7, recorded by the workload controller)", source: true,
		mirrors:    []runtime.Object{newMirror(identityName, "ns-a", sourceData())},
		conflicted: []string{"ns-z", "ns-y"},
		status:     metav1.ConditionFalse, reason: v1alpha1.ReasonMirrorsConflicted, counts: v1alpha1.MirrorCounts{Total: 1, Current: 1, Conflicted: 2},
		msg: "ns-y, ns-z",
	}, {
		name:    "source gone: the mirrors keep old data",
		mirrors: []runtime.Object{newMirror(identityName, "ns-a", sourceData())},
		status:  metav1.ConditionFalse, reason: v1alpha1.ReasonMirrorsStale, counts: v1alpha1.MirrorCounts{Total: 1},
		msg: "does not exist",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Resync: resync})
			f.seed(newIdentity(identityName, allowAll()))
			if tc.source {
				f.seed(newSource(sourceData()))
			}
			f.seed(tc.mirrors...)
			for _, ns := range tc.conflicted {
				f.Tracker.Set(identityName, ns, true)
			}

			require.NoError(t, f.sync(identityName))

			st := f.lastStatus()
			require.Equal(t, &tc.counts, st.Mirrors)
			c := requireCondition(t, st, v1alpha1.ConditionMirrorsCurrent, tc.status, tc.reason)
			require.Contains(t, c.Message, tc.msg)
			if !tc.source {
				require.Empty(t, f.enqueuedOwners(), "nothing to rewrite from")
			}
		})
	}
}

// S3: an unchanged pass writes no status, even after time passes.
func TestSyncNoStatusWriteWhenUnchanged(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	f.seed(newIdentity(identityName, allowAll()), newSource(sourceData()),
		newMirror(identityName, "ns-a", sourceData()))
	require.NoError(t, f.sync(identityName))
	require.Len(t, f.statusWrites(), 1)
	f.catchUp()
	f.PopEvents()

	for range 3 {
		f.Clock.Step(resync)
		require.NoError(t, f.sync(identityName))
	}
	require.Empty(t, f.writes())
	require.Empty(t, f.PopEvents())
}

// V5: mirrors in namespaces the identity no longer allows are deleted (UID
// precondition) and not counted, even when no user there reconciles.
func TestSyncDeletesMirrorsInDisallowedNamespaces(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	allowed := &v1alpha1.AllowedNamespaces{
		List:     []string{"ns-listed"},
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"captf": "yes"}},
	}
	revokedLabel := newMirror(identityName, "ns-relabelled", sourceData())
	revokedList := newMirror(identityName, "ns-unlisted", sourceData())
	f.seed(newIdentity(identityName, allowed), newSource(sourceData()),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-labelled", Labels: map[string]string{"captf": "yes"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-relabelled", Labels: map[string]string{"captf": "no"}}},
		newMirror(identityName, "ns-listed", sourceData()),
		newMirror(identityName, "ns-labelled", sourceData()),
		revokedLabel, revokedList,
		newMirror("other", "ns-unlisted", sourceData()), // another identity's
	)

	require.NoError(t, f.sync(identityName))

	require.Equal(t, map[string]types.UID{
		"ns-relabelled/" + mirrorName: revokedLabel.UID,
		"ns-unlisted/" + mirrorName:   revokedList.UID,
	}, f.deletes())
	st := f.lastStatus()
	require.Equal(t, []string{"ns-labelled", "ns-listed"}, st.Namespaces)
	require.Equal(t, &v1alpha1.MirrorCounts{Total: 2, Current: 2}, st.Mirrors)
}

// V5: every mirror of an identity that is gone is deleted; others stay.
func TestSyncDeletesMirrorsOfDeletedIdentity(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	a := newMirror(identityName, "ns-a", sourceData())
	b := newMirror(identityName, "ns-b", sourceData())
	f.seed(newSource(sourceData()), a, b, newMirror("other", "ns-a", sourceData()))
	f.Tracker.Set(identityName, "ns-c", true)

	require.NoError(t, f.sync(identityName))

	require.Equal(t, map[string]types.UID{"ns-a/" + mirrorName: a.UID, "ns-b/" + mirrorName: b.UID}, f.deletes())
	require.Empty(t, f.statusWrites())
	require.Empty(t, f.Tracker.Namespaces(identityName), "its conflicts are forgotten")
	controllertest.RequireNothingQueued(t, f.queue, f.Clock, "nothing left to look at")
	require.NotNil(t, f.storedSecret("ns-a", credentials.MirrorName("other")))
}

// S1: the identity is re-read every --identity-resync, every 30s while
// not Ready, or every --identity-resync while not Ready when that is
// shorter; the requeue fires on the (fake) clock.
func TestSyncRequeue(t *testing.T) {
	key := cache.ObjectName{Name: identityName}
	tests := []struct {
		name   string
		resync time.Duration
		source bool
		want   time.Duration
	}{
		{"S1 Ready: --identity-resync", resync, true, resync},
		{"S1 not Ready: 30s", resync, false, 30 * time.Second},
		{"S1 not Ready with a shorter --identity-resync", 10 * time.Second, false, 10 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Resync: tc.resync})
			f.seed(newIdentity(identityName, allowAll()))
			if tc.source {
				f.seed(newSource(sourceData()))
			}

			require.NoError(t, f.sync(identityName))

			controllertest.RequireRequeuedAfter(t, f.queue, f.Clock, key, tc.want)
		})
	}
}

// S2: status.namespaces is bounded at 1000; status.mirrors.total counts all.
func TestSyncNamespacesBounded(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	f.seed(newIdentity(identityName, allowAll()), newSource(sourceData()))
	idx := f.inf.Mirrors.Informer().GetIndexer()
	for i := range maxNamespaces + 5 {
		m := newMirror(identityName, fmt.Sprintf("ns-%04d", i), sourceData())
		require.NoError(t, idx.Add(m))
		f.seedUser(m.Namespace, m.OwnerReferences[0], identityName) // B2: counted with a live user
	}

	require.NoError(t, f.sync(identityName))

	st := f.lastStatus()
	require.Len(t, st.Namespaces, maxNamespaces)
	require.IsNonDecreasing(t, st.Namespaces)
	require.Equal(t, int32(maxNamespaces+5), st.Mirrors.Total)
}

// P1 at start-up: a mirror or Job of the informers' initial list does not
// enqueue its identity (the identity's own initial add does, and its
// reconcile waits for those caches); enqueued again a second later, every
// identity would read its source twice at each start. A mirror added
// later does enqueue it, after mirrorEventDelay (S2).
func TestInitialListMirrorEnqueuesNothing(t *testing.T) {
	key := cache.ObjectName{Name: identityName}
	f := newFixture(t, Options{Resync: resync})
	m := newMirror(identityName, "team-a", sourceData())
	h := f.c.annotationHandler()

	h.OnAdd(m, true)
	controllertest.RequireNothingQueued(t, f.queue, f.Clock, "a mirror of the initial list enqueued its identity")

	h.OnAdd(m, false)
	controllertest.RequireRequeuedAfter(t, f.queue, f.Clock, key, mirrorEventDelay)
}

// P1 for the identity's own passes: a pass may use a source read that
// began after the identity's key was last added to the queue. At start-up
// the identity and its users are all queued before any read, so the
// identity's pass reuses the read a user's reconcile began (one GET per
// identity, not two); a pass whose key was added after that read reads
// afresh (S1: every change is seen by a read after it).
func TestPassReusesAReadThatBeganAfterTheAdd(t *testing.T) {
	key := cache.ObjectName{Name: identityName}
	f := newFixture(t, Options{Resync: resync})
	f.seed(newIdentity(identityName, allowAll()), newSource(sourceData()))

	take := func() {
		t.Helper()
		got, _ := f.queue.Get()
		f.queue.Done(got)
		require.Equal(t, key, got)
	}

	f.queue.Add(key)
	// A user's reconcile, queued after the identity, reads first.
	_, err := f.reader.Get(f.Ctx, f.reader.Begin(), sourceNS, sourceName)
	require.NoError(t, err)
	require.Len(t, f.reads(), 1)
	take()
	require.NoError(t, f.sync(identityName))
	require.Len(t, f.reads(), 1, "the pass read again although a read began after its key was added: %v", f.reads())

	// Added again (a change) after that read: the pass reads afresh.
	f.queue.Add(key)
	take()
	require.NoError(t, f.sync(identityName))
	require.Len(t, f.reads(), 2, "the pass used a read that began before its key was added")
}

// V5 across a restart: the initial list's mirrors enqueue nothing, so an
// identity deleted while the manager was down has to be found once the
// caches have synced, or its mirrors would stay. Only identities that do
// not exist are enqueued: the others have their own initial add.
func TestStartEnqueuesGoneIdentities(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	f.seed(newIdentity(identityName, allowAll()), newSource(sourceData()),
		newMirror(identityName, "team-a", sourceData()),
		newMirror("gone", "team-b", sourceData()))

	f.c.enqueueGone()

	controllertest.RequireQueued(t, f.queue, cache.ObjectName{Name: "gone"})
	require.Zero(t, f.queue.Len(), "an identity that exists was enqueued too")

	require.NoError(t, f.sync("gone"))
	require.Contains(t, f.deletes(), "team-b/"+credentials.MirrorName("gone"), "the gone identity's mirror was not removed (V5)")
}
