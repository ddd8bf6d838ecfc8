package identity

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/credentials"
)

// Tests of SPEC section 14 (C1-C5) in the identity status controller.

const consentOn, consentOff = true, false

func options(consent bool) Options { return Options{Resync: resync, RequireSourceConsent: consent} }

// consenting marks a source as usable by the identities listed (C1).
func consenting(s *corev1.Secret, identities string) *corev1.Secret {
	s.Labels = map[string]string{v1alpha1.LabelCredential: v1alpha1.LabelTrue}
	s.Annotations = map[string]string{v1alpha1.AnnotationCredentialIdentities: identities}
	return s
}

// mirrorSource is a source Secret that is itself a captf mirror (of the
// identity "other"), which C2 refuses.
func mirrorSource() *corev1.Secret {
	s := consenting(newSource(sourceData()), "*")
	s.Labels[v1alpha1.LabelMirrored] = v1alpha1.LabelTrue
	s.Labels[v1alpha1.LabelManaged] = v1alpha1.LabelTrue
	s.Annotations[v1alpha1.AnnotationIdentity] = "other"
	s.Annotations[v1alpha1.AnnotationSourceHash] = credentials.SourceHash(sourceData())
	s.UID = "uid-source"
	return s
}

func saTokenSource() *corev1.Secret {
	s := consenting(newSource(sourceData()), "*")
	s.Type = corev1.SecretTypeServiceAccountToken
	return s
}

func withRequiredKeys(id *v1alpha1.TerraformClusterIdentity, keys ...string) *v1alpha1.TerraformClusterIdentity {
	id.Spec.RequiredKeys = keys
	return id
}

// updateSource replaces the source Secret in the fake API server.
func (f *fixture) updateSource(s *corev1.Secret) {
	f.t.Helper()
	require.NoError(f.t, f.Kube.Tracker().Update(secretsGR, s, sourceNS))
}

// updateIdentity replaces the identity in the fake API server and its
// informer.
func (f *fixture) updateIdentity(id *v1alpha1.TerraformClusterIdentity) {
	f.t.Helper()
	stored, err := f.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.Ctx, id.Name, metav1.GetOptions{})
	require.NoError(f.t, err)
	stored.Spec = id.Spec
	stored.Generation++
	require.NoError(f.t, f.Captf.Tracker().Update(identityGR, stored, ""))
	f.catchUp()
}

// C1, C2, C3: the identity's Ready condition for each section-14 reason,
// and SecretFound when the source may be used. NotOptedIn and
// SourceRefused delete every mirror of the identity (UID precondition);
// CredentialsIncomplete keeps them (running Jobs keep their files).
func TestSyncReadySection14(t *testing.T) {
	tests := []struct {
		name     string
		consent  bool
		identity *v1alpha1.TerraformClusterIdentity
		source   *corev1.Secret
		reason   v1alpha1.ConditionReason
		msg      []string
		revokes  bool
	}{{
		name: "C1 consent off, unlabelled source: SecretFound", consent: consentOff,
		source: newSource(sourceData()), reason: v1alpha1.ReasonSecretFound,
	}, {
		name: "C1 consent on, no label: NotOptedIn", consent: consentOn,
		source: newSource(sourceData()), reason: v1alpha1.ReasonNotOptedIn, revokes: true,
		msg: []string{sourceNS + "/" + sourceName, v1alpha1.LabelCredential},
	}, {
		name: "C1 consent on, annotation names other identities: NotOptedIn", consent: consentOn,
		source: consenting(newSource(sourceData()), "dev, prod-eu"), reason: v1alpha1.ReasonNotOptedIn, revokes: true,
		msg: []string{identityName, v1alpha1.AnnotationCredentialIdentities},
	}, {
		name: "C1 consent on, annotation names the identity: SecretFound", consent: consentOn,
		source: consenting(newSource(sourceData()), "dev,"+identityName), reason: v1alpha1.ReasonSecretFound,
	}, {
		name: "C1 consent on, annotation *: SecretFound", consent: consentOn,
		source: consenting(newSource(sourceData()), "*"), reason: v1alpha1.ReasonSecretFound,
	}, {
		name: "C2 source is a mirror, consent off: SourceRefused", consent: consentOff,
		source: mirrorSource(), reason: v1alpha1.ReasonSourceRefused, revokes: true,
		msg: []string{sourceNS + "/" + sourceName, v1alpha1.LabelMirrored},
	}, {
		name: "C2 source is a mirror, consent on: SourceRefused", consent: consentOn,
		source: mirrorSource(), reason: v1alpha1.ReasonSourceRefused, revokes: true,
		msg: []string{v1alpha1.LabelMirrored},
	}, {
		name: "C2 service-account token, consent off: SourceRefused", consent: consentOff,
		source: saTokenSource(), reason: v1alpha1.ReasonSourceRefused, revokes: true,
		msg: []string{string(corev1.SecretTypeServiceAccountToken)},
	}, {
		name: "C2 service-account token, consent on: SourceRefused", consent: consentOn,
		source: saTokenSource(), reason: v1alpha1.ReasonSourceRefused, revokes: true,
		msg: []string{string(corev1.SecretTypeServiceAccountToken)},
	}, {
		name: "C3 missing required key: CredentialsIncomplete, mirrors kept", consent: consentOff,
		identity: withRequiredKeys(newIdentity(identityName, allowAll()), "API_KEY", "SECRET_KEY", "ACCESS_KEY"),
		source:   newSource(sourceData()), reason: v1alpha1.ReasonCredentialsIncomplete,
		msg: []string{"ACCESS_KEY, SECRET_KEY"},
	}, {
		name: "C3 every required key present (an empty value counts): SecretFound", consent: consentOff,
		identity: withRequiredKeys(newIdentity(identityName, allowAll()), "API_KEY", "EMPTY"),
		source:   newSource(map[string][]byte{"API_KEY": []byte(secretValue), "REGION": []byte("eu-west-1"), "EMPTY": {}}),
		reason:   v1alpha1.ReasonSecretFound,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, options(tc.consent))
			id := tc.identity
			if id == nil {
				id = newIdentity(identityName, allowAll())
			}
			f.Secrets = append(f.Secrets, credentials.SourceHash(tc.source.Data))
			a := newMirror(identityName, "ns-a", tc.source.Data)
			b := newMirror(identityName, "ns-b", tc.source.Data)
			f.seed(id, tc.source, a, b, newMirror("other", "ns-a", sourceData()))

			require.NoError(t, f.sync(identityName))

			st := f.lastStatus()
			if tc.reason == v1alpha1.ReasonSecretFound {
				requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSecretFound)
				require.Empty(t, f.deletes())
				require.Equal(t, []string{"ns-a", "ns-b"}, st.Namespaces)
				require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventSecretFound)
				return
			}
			c := requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionFalse, tc.reason)
			for _, m := range tc.msg {
				require.Contains(t, c.Message, m)
			}
			if tc.revokes {
				require.Equal(t, map[string]types.UID{"ns-a/" + mirrorName: a.UID, "ns-b/" + mirrorName: b.UID}, f.deletes(),
					"C1, C2: every mirror of the identity is revoked, others stay")
				require.Empty(t, st.Namespaces)
			} else {
				require.Empty(t, f.deletes(), "C3: mirrors are kept")
				require.Equal(t, []string{"ns-a", "ns-b"}, st.Namespaces)
			}
			require.NotNil(t, f.storedSecret(sourceNS, sourceName), "V6: the source is never deleted")
			require.NotNil(t, f.storedSecret("ns-a", credentials.MirrorName("other")))
			require.Equal(t, []string{"Warning " + string(tc.reason)}, eventReasons(f.PopEvents()))
		})
	}
}

// Section 10, C1-C3: one event per change of Ready: a Warning with the
// section-14 reason when Ready turns to it, SecretFound (Normal) when it is
// True again; an identical pass emits nothing and writes nothing.
func TestSyncReadyEventsSection14(t *testing.T) {
	f := newFixture(t, options(consentOn))
	id := newIdentity(identityName, allowAll())
	f.seed(id, newSource(sourceData()))
	pass := func(want ...string) {
		t.Helper()
		require.NoError(t, f.sync(identityName))
		require.Equal(t, want, eventReasons(f.PopEvents()))
		f.catchUp()
		require.NoError(t, f.sync(identityName))
		require.Empty(t, f.PopEvents(), "once per change")
		require.Empty(t, f.writes(), "S3: an identical pass writes nothing")
		f.catchUp()
	}

	pass("Warning " + string(v1alpha1.ReasonNotOptedIn))
	f.updateSource(consenting(newSource(sourceData()), identityName))
	pass("Normal " + v1alpha1.EventSecretFound)
	f.updateIdentity(withRequiredKeys(id.DeepCopy(), "SECRET_KEY"))
	pass("Warning " + string(v1alpha1.ReasonCredentialsIncomplete))
	f.updateSource(mirrorSource())
	pass("Warning " + string(v1alpha1.ReasonSourceRefused))
	f.updateIdentity(newIdentity(identityName, allowAll()))
	f.updateSource(consenting(newSource(sourceData()), "*"))
	pass("Normal " + v1alpha1.EventSecretFound)
	f.updateSource(consenting(newSource(sourceData()), "dev"))
	pass("Warning " + string(v1alpha1.ReasonNotOptedIn))
}

// S1 with section 14: an identity that is not Ready because of C1-C3 is
// "not Ready", so it is re-read every 30s (or --identity-resync if
// shorter), not only every --identity-resync.
func TestSyncRequeueNotReadySection14(t *testing.T) {
	key := cache.ObjectName{Name: identityName}
	for _, tc := range []struct {
		name     string
		consent  bool
		identity *v1alpha1.TerraformClusterIdentity
		source   *corev1.Secret
	}{
		{"C1 NotOptedIn", consentOn, newIdentity(identityName, allowAll()), newSource(sourceData())},
		{"C2 SourceRefused", consentOff, newIdentity(identityName, allowAll()), saTokenSource()},
		{"C3 CredentialsIncomplete", consentOff, withRequiredKeys(newIdentity(identityName, allowAll()), "SECRET_KEY"), newSource(sourceData())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, options(tc.consent))
			f.seed(tc.identity, tc.source)

			require.NoError(t, f.sync(identityName))

			controllertest.RequireRequeuedAfter(t, f.queue, f.Clock, key, notReadyResync)
		})
	}
}

// C4: the hygiene report. CredentialsValid=False/KeysNeedAttention names,
// by category, the keys that are not environment variable names, that
// start with TF_ or KUBE_, and whose values are empty or end with
// whitespace; True/KeysValid otherwise. Never a refusal (Ready stays True)
// and never a value.
func TestSyncCredentialsValid(t *testing.T) {
	const trailing = "tr4iling-VALUE-x4"
	tests := []struct {
		name string
		data map[string][]byte
		want []string // substrings of the message, in order
	}{{
		name: "C4 clean keys: KeysValid",
		data: map[string][]byte{"API_KEY": []byte(secretValue), "_private": []byte("x"), "Region2": []byte("eu")},
	}, {
		name: "C4 not environment variable names",
		data: map[string][]byte{"API_KEY": []byte(secretValue), "a.b": []byte("x"), "1x": []byte("x"), "with-dash": []byte("x")},
		want: []string{"not valid environment variable names", ": 1x, a.b, with-dash"},
	}, {
		name: "C4 dropped by the runner",
		data: map[string][]byte{"API_KEY": []byte(secretValue), "TF_VAR_x": []byte("x"), "KUBE_TOKEN": []byte("x")},
		want: []string{"start with TF_ or KUBE_", ": KUBE_TOKEN, TF_VAR_x"},
	}, {
		name: "C4 trailing newline",
		data: map[string][]byte{"API_KEY": []byte(secretValue), "NEWLINE": []byte(trailing + "\n")},
		want: []string{"empty, or ending with whitespace", ": NEWLINE"},
	}, {
		name: "C4 trailing space and tab",
		data: map[string][]byte{"API_KEY": []byte(secretValue), "SPACE": []byte(trailing + " "), "TAB": []byte(trailing + "\t")},
		want: []string{"empty, or ending with whitespace", ": SPACE, TAB"},
	}, {
		name: "C4 empty value",
		data: map[string][]byte{"API_KEY": []byte(secretValue), "EMPTY": {}},
		want: []string{"empty, or ending with whitespace", ": EMPTY"},
	}, {
		name: "C4 every category at once",
		data: map[string][]byte{
			"API_KEY": []byte(secretValue), "a.b": []byte("x"), "1x": []byte("x"), "with-dash": []byte("x"),
			"TF_VAR_x": []byte("x"), "KUBE_TOKEN": []byte("x"), "NEWLINE": []byte(trailing + "\n"), "EMPTY": {},
		},
		want: []string{": 1x, a.b, with-dash", ": KUBE_TOKEN, TF_VAR_x", ": EMPTY, NEWLINE"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, options(consentOff))
			f.Secrets = append(f.Secrets, trailing, credentials.SourceHash(tc.data))
			f.seed(newIdentity(identityName, allowAll()), newSource(tc.data))

			require.NoError(t, f.sync(identityName))

			st := f.lastStatus()
			requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSecretFound)
			events := f.PopEvents()
			if len(tc.want) == 0 {
				requireCondition(t, st, v1alpha1.ConditionCredentialsValid, metav1.ConditionTrue, v1alpha1.ReasonKeysValid)
				require.Equal(t, []string{"Normal " + v1alpha1.EventSecretFound}, eventReasons(events), "no KeysValid event: nothing became clean")
				return
			}
			c := requireCondition(t, st, v1alpha1.ConditionCredentialsValid, metav1.ConditionFalse, v1alpha1.ReasonKeysNeedAttention)
			rest := c.Message
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				require.GreaterOrEqual(t, i, 0, "%q not in %q", w, c.Message)
				rest = rest[i+len(w):]
			}
			require.NotContains(t, c.Message, "API_KEY", "a clean key is not named")
			require.ElementsMatch(t, []string{"Normal " + v1alpha1.EventSecretFound, "Warning " + v1alpha1.EventKeysNeedAttention}, eventReasons(events))
			// X1, explicitly: key names, never values (the fixture's scan
			// covers logs too).
			for _, s := range append(events, c.Message) {
				require.NotContains(t, s, secretValue)
				require.NotContains(t, s, trailing)
			}
		})
	}
}

// C4: a KeysNeedAttention Warning when the set of keys named changes, none
// on an unchanged pass, a KeysValid Normal event when the keys become
// clean; the values never appear.
func TestSyncCredentialsValidEvents(t *testing.T) {
	const trailing = "tr4iling-VALUE-x4"
	f := newFixture(t, options(consentOff))
	bad := map[string][]byte{"API_KEY": []byte(trailing + "\n"), "with-dash": []byte("x")}
	worse := map[string][]byte{"API_KEY": []byte(trailing + "\n"), "with-dash": []byte("x"), "TF_VAR_x": []byte("x")}
	f.Secrets = append(f.Secrets, trailing, credentials.SourceHash(bad), credentials.SourceHash(worse))
	f.seed(newIdentity(identityName, allowAll()), newSource(bad))
	pass := func(want ...string) []string {
		t.Helper()
		require.NoError(t, f.sync(identityName))
		events := f.PopEvents()
		require.Equal(t, want, eventReasons(events))
		f.catchUp()
		require.NoError(t, f.sync(identityName))
		require.Empty(t, f.PopEvents(), "once per change")
		require.Empty(t, f.writes())
		f.catchUp()
		return events
	}

	events := pass("Normal "+v1alpha1.EventSecretFound, "Warning "+v1alpha1.EventKeysNeedAttention)
	require.Contains(t, events[1], "API_KEY")
	require.Contains(t, events[1], "with-dash")

	// The same keys need attention, the value changed (still ending with a
	// newline): the report is the same, no event.
	same := map[string][]byte{"API_KEY": []byte(trailing + "2\n"), "with-dash": []byte("y")}
	f.Secrets = append(f.Secrets, credentials.SourceHash(same))
	f.updateSource(newSource(same))
	require.NoError(t, f.sync(identityName))
	require.Empty(t, f.PopEvents(), "the set of keys did not change")
	f.catchUp()

	f.updateSource(newSource(worse))
	events = pass("Warning " + v1alpha1.EventKeysNeedAttention)
	require.Contains(t, events[0], "TF_VAR_x")

	f.updateSource(newSource(sourceData()))
	pass("Normal " + v1alpha1.EventKeysValid)
	stored, err := f.inf.Identities.Lister().Get(identityName)
	require.NoError(t, err)
	requireCondition(t, &stored.Status, v1alpha1.ConditionCredentialsValid, metav1.ConditionTrue, v1alpha1.ReasonKeysValid)
}

// newIdentityJob is a Job of a workload object in namespace, built by
// jobs.Build as the workload controller does, with the identity and source
// hash it started with (C5), in state outcome.
func newIdentityJob(namespace, owner, identity, hash string, outcome batchv1.JobConditionType) *batchv1.Job {
	j := jobs.Build(jobs.Params{
		OwnerAPIVersion: v1alpha1.SchemeGroupVersion.String(), OwnerKind: "TerraformCluster", OwnerName: owner,
		OwnerUID: types.UID("uid-" + owner), Namespace: namespace, Generation: 1, Action: v1alpha1.JobActionApply,
		ModuleImage: "registry.example.com/m:v1", RunnerImage: "registry.example.com/captf:v0",
		MirrorName: credentials.MirrorName(identity), SourceHash: hash, Identity: identity,
	})
	j.UID = types.UID("uid-job-" + namespace + "-" + owner)
	j.ResourceVersion = "1"
	setJobState(j, outcome)
	return j
}

// setJobState sets the conditions of a Job: "" running,
// JobFailureTarget decided but not finished, JobComplete or JobFailed.
func setJobState(j *batchv1.Job, outcome batchv1.JobConditionType) {
	cond := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue}
	}
	switch outcome {
	case "":
		j.Status.Conditions = nil
	case batchv1.JobComplete:
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)}
	case batchv1.JobFailed:
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget), cond(batchv1.JobFailed)}
	default:
		j.Status.Conditions = []batchv1.JobCondition{cond(outcome)}
	}
}

// C5: status.rotation and RotationComplete: True once every mirror
// carries the current hash and no running Job of this identity started
// with an older one. Jobs of other identities, Jobs on the current hash
// and finished Jobs do not count.
func TestSyncRotationComplete(t *testing.T) {
	const running batchv1.JobConditionType = ""
	old := map[string][]byte{"API_KEY": []byte("0ld-VALUE-x1"), "REGION": []byte("eu-west-1")}
	hashA, hashB := credentials.SourceHash(old), credentials.SourceHash(sourceData())
	tests := []struct {
		name    string
		mirrors []*corev1.Secret
		jobs    []*batchv1.Job
		want    v1alpha1.RotationStatus
		status  metav1.ConditionStatus
		reason  v1alpha1.ConditionReason
		msg     string
	}{{
		name:    "C5 every mirror current, no Job: RotationComplete",
		mirrors: []*corev1.Secret{newMirror(identityName, "ns-a", sourceData()), newMirror(identityName, "ns-b", sourceData())},
		want:    v1alpha1.RotationStatus{MirrorsCurrent: 2},
		status:  metav1.ConditionTrue, reason: v1alpha1.ReasonRotationComplete,
	}, {
		name:    "C5 a stale mirror: MirrorsStale",
		mirrors: []*corev1.Secret{newMirror(identityName, "ns-a", sourceData()), newMirror(identityName, "ns-b", old)},
		want:    v1alpha1.RotationStatus{MirrorsCurrent: 1, MirrorsStale: 1},
		status:  metav1.ConditionFalse, reason: v1alpha1.ReasonMirrorsStale,
	}, {
		name:    "C5 a running Job on the previous hash: JobsOnPreviousCredentials, naming it",
		mirrors: []*corev1.Secret{newMirror(identityName, "ns-a", sourceData()), newMirror(identityName, "ns-b", sourceData())},
		jobs:    []*batchv1.Job{newIdentityJob("ns-a", "c-old", identityName, hashA, running)},
		want:    v1alpha1.RotationStatus{MirrorsCurrent: 2, JobsOnPreviousCredentials: 1},
		status:  metav1.ConditionFalse, reason: v1alpha1.ReasonJobsOnPreviousCredentials,
		msg: "ns-a/" + jobs.Name("TerraformCluster", "c-old", "uid-c-old", v1alpha1.JobActionApply, 1),
	}, {
		name:    "C5 a Job decided but not Finished (FailureTarget) still runs",
		mirrors: []*corev1.Secret{newMirror(identityName, "ns-a", sourceData())},
		jobs:    []*batchv1.Job{newIdentityJob("ns-a", "c-old", identityName, hashA, batchv1.JobFailureTarget)},
		want:    v1alpha1.RotationStatus{MirrorsCurrent: 1, JobsOnPreviousCredentials: 1},
		status:  metav1.ConditionFalse, reason: v1alpha1.ReasonJobsOnPreviousCredentials,
	}, {
		name:    "C5 Jobs on the previous hash that finished do not count",
		mirrors: []*corev1.Secret{newMirror(identityName, "ns-a", sourceData())},
		jobs: []*batchv1.Job{
			newIdentityJob("ns-a", "c-complete", identityName, hashA, batchv1.JobComplete),
			newIdentityJob("ns-a", "c-failed", identityName, hashA, batchv1.JobFailed),
		},
		want:   v1alpha1.RotationStatus{MirrorsCurrent: 1},
		status: metav1.ConditionTrue, reason: v1alpha1.ReasonRotationComplete,
	}, {
		name:    "C5 running Jobs of another identity, or on the current hash, do not count",
		mirrors: []*corev1.Secret{newMirror(identityName, "ns-a", sourceData())},
		jobs: []*batchv1.Job{
			newIdentityJob("ns-a", "c-other", "other", hashA, running),
			newIdentityJob("ns-a", "c-current", identityName, hashB, running),
		},
		want:   v1alpha1.RotationStatus{MirrorsCurrent: 1},
		status: metav1.ConditionTrue, reason: v1alpha1.ReasonRotationComplete,
	}, {
		name:    "C5 stale mirror and old running Job: both counted",
		mirrors: []*corev1.Secret{newMirror(identityName, "ns-a", old)},
		jobs:    []*batchv1.Job{newIdentityJob("ns-a", "c-old", identityName, hashA, running)},
		want:    v1alpha1.RotationStatus{MirrorsStale: 1, JobsOnPreviousCredentials: 1},
		status:  metav1.ConditionFalse,
	}, {
		name:   "C5 no mirror, no Job: RotationComplete",
		want:   v1alpha1.RotationStatus{},
		status: metav1.ConditionTrue, reason: v1alpha1.ReasonRotationComplete,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, options(consentOff))
			f.Secrets = append(f.Secrets, "0ld-VALUE-x1", hashA)
			f.seed(newIdentity(identityName, allowAll()), newSource(sourceData()))
			for _, m := range tc.mirrors {
				f.seed(m)
			}
			for _, j := range tc.jobs {
				f.seed(j)
			}

			require.NoError(t, f.sync(identityName))

			st := f.lastStatus()
			require.Equal(t, &tc.want, st.Rotation)
			c := conditionOf(t, st, v1alpha1.ConditionRotationComplete)
			require.Equal(t, tc.status, c.Status, c.Message)
			if tc.reason != "" {
				require.Equal(t, string(tc.reason), c.Reason, c.Message)
			}
			require.Contains(t, c.Message, tc.msg)
			require.NotContains(t, c.Message, hashA)
			require.NotContains(t, c.Message, hashB)
		})
	}
}

func conditionOf(t *testing.T, st *v1alpha1.TerraformClusterIdentityStatus, ct v1alpha1.ConditionType) metav1.Condition {
	t.Helper()
	for _, c := range st.Conditions {
		if c.Type == string(ct) {
			return c
		}
	}
	t.Fatalf("condition %s missing in %+v", ct, st.Conditions)
	return metav1.Condition{}
}

// C5: RotationComplete turns True once the Job that started with the
// previous credentials has finished (Complete or Failed); the status is
// written then, and not again on an unchanged pass.
func TestSyncRotationCompleteWhenOldJobEnds(t *testing.T) {
	old := map[string][]byte{"API_KEY": []byte("0ld-VALUE-x1"), "REGION": []byte("eu-west-1")}
	for _, end := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		t.Run(string(end), func(t *testing.T) {
			f := newFixture(t, options(consentOff))
			f.Secrets = append(f.Secrets, "0ld-VALUE-x1", credentials.SourceHash(old))
			j := newIdentityJob("ns-a", "c1", identityName, credentials.SourceHash(old), "")
			f.seed(newIdentity(identityName, allowAll()), newSource(sourceData()), newMirror(identityName, "ns-a", sourceData()), j)

			require.NoError(t, f.sync(identityName))
			c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionRotationComplete, metav1.ConditionFalse, v1alpha1.ReasonJobsOnPreviousCredentials)
			require.Contains(t, c.Message, "ns-a/"+j.Name)
			f.catchUp()

			require.NoError(t, f.sync(identityName))
			require.Empty(t, f.writes(), "unchanged")
			f.catchUp()

			ended := j.DeepCopy()
			setJobState(ended, end)
			ended.ResourceVersion = "2"
			require.NoError(t, f.inf.Jobs.Informer().GetIndexer().Update(ended))
			f.Clock.Step(time.Minute)
			require.NoError(t, f.sync(identityName))
			st := f.lastStatus()
			requireCondition(t, st, v1alpha1.ConditionRotationComplete, metav1.ConditionTrue, v1alpha1.ReasonRotationComplete)
			require.Equal(t, &v1alpha1.RotationStatus{MirrorsCurrent: 1}, st.Rotation)
		})
	}
}

// C5: when the rotation reaches the mirror (the workload controller
// rewrote it), MirrorsStale turns into RotationComplete.
func TestSyncRotationCompleteWhenMirrorCatchesUp(t *testing.T) {
	old := map[string][]byte{"API_KEY": []byte("0ld-VALUE-x1"), "REGION": []byte("eu-west-1")}
	f := newFixture(t, options(consentOff))
	f.Secrets = append(f.Secrets, "0ld-VALUE-x1", credentials.SourceHash(old))
	f.seed(newIdentity(identityName, allowAll()), newSource(sourceData()), newMirror(identityName, "ns-a", old))

	require.NoError(t, f.sync(identityName))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionRotationComplete, metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale)
	require.Equal(t, &v1alpha1.RotationStatus{MirrorsStale: 1}, f.lastStatus().Rotation)
	f.catchUp()

	current := newMirror(identityName, "ns-a", sourceData())
	require.NoError(t, f.Kube.Tracker().Update(secretsGR, current, "ns-a"))
	f.catchUp()
	require.NoError(t, f.sync(identityName))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionRotationComplete, metav1.ConditionTrue, v1alpha1.ReasonRotationComplete)
	require.Equal(t, &v1alpha1.RotationStatus{MirrorsCurrent: 1}, f.lastStatus().Rotation)
}

// V6 with C2: an identity pointed at its own mirror is refused, and the
// revocation of its mirrors never deletes that mirror, its source.
func TestSyncRefusedOwnMirrorSourceIsNotDeleted(t *testing.T) {
	f := newFixture(t, options(false))
	a := newMirror(identityName, "ns-a", sourceData())
	b := newMirror(identityName, "ns-b", sourceData())
	id := newIdentity(identityName, allowAll())
	id.Spec.SecretRef = v1alpha1.SecretReference{Namespace: "ns-a", Name: a.Name}
	f.seed(id, a, b)

	require.NoError(t, f.sync(identityName))

	requireCondition(t, f.lastStatus(), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSourceRefused)
	require.Equal(t, map[string]types.UID{"ns-b/" + mirrorName: b.UID}, f.deletes(), "only the other mirror is revoked")
	require.NotNil(t, f.storedSecret("ns-a", a.Name), "V6: the source is never deleted")
}
