package jobs

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

const (
	kindCluster = "TerraformCluster"
	kindMachine = "TerraformMachine"
	uidA        = types.UID("0b6c1f0e-5d1a-4b7e-9a43-2f6f1e0c9d10")
	uidB        = types.UID("7a2d9e3c-1b4f-4e8a-b6c5-3d9f0a1e2b47")
)

// requireValidJobName checks what SPEC J1 and the Job controller need of a
// Job name: a DNS label of at most 63 characters, usable as a label value.
func requireValidJobName(t testing.TB, name string) {
	t.Helper()
	require.LessOrEqual(t, len(name), MaxNameLength, name)
	require.Empty(t, validation.IsDNS1123Label(name), name)
	require.Empty(t, validation.IsValidLabelValue(name), name)
}

var readableName = regexp.MustCompile(`^([a-z0-9-]+)-(apply|destroy)-([0-9]+)-([0-9a-f]{8})$`)

func TestNameJ1ReadableForm(t *testing.T) {
	name := Name(kindCluster, "prod", uidA, v1alpha1.JobActionApply, 3)
	m := readableName.FindStringSubmatch(name)
	require.NotNil(t, m, name)
	require.Equal(t, "prod", m[1])
	require.Equal(t, "apply", m[2])
	require.Equal(t, "3", m[3])

	name = Name(kindMachine, "prod.eu-west-1.worker", uidA, v1alpha1.JobActionDestroy, 12)
	m = readableName.FindStringSubmatch(name)
	require.NotNil(t, m, name)
	require.Equal(t, "prod-eu-west-1-worker", m[1], "'.' maps to '-'")
	require.Equal(t, "destroy", m[2])
	require.Equal(t, "12", m[3])
}

func TestNameJ1Deterministic(t *testing.T) {
	for range 3 {
		require.Equal(t,
			Name(kindCluster, "prod", uidA, v1alpha1.JobActionApply, 3),
			Name(kindCluster, "prod", uidA, v1alpha1.JobActionApply, 3))
	}
	// A known value, so that a change of the scheme (which would orphan the
	// Jobs of running managers across an upgrade) is a deliberate one.
	require.Equal(t, "prod-apply-3-"+nameHash(kindCluster, "prod", uidA, v1alpha1.JobActionApply, 3),
		Name(kindCluster, "prod", uidA, v1alpha1.JobActionApply, 3))
}

func TestNameJ1ValidDNSLabelAtMost63(t *testing.T) {
	// The name part of an apply Job at generation 1 gets 63 - len("-apply-1-") - 8 = 46 characters.
	dashAt46 := strings.Repeat("a", 45) + "-" + strings.Repeat("b", 20)
	require.Equal(t, byte('-'), dashAt46[45])

	label63 := strings.Repeat("x", 63)
	sub253 := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	require.Len(t, sub253, 253)
	require.Empty(t, validation.IsDNS1123Subdomain(sub253))

	names := []string{
		"a",
		"0",
		label63,
		sub253,
		strings.Repeat("z", 253),
		"prod.eu-west-1",
		"a.b.c.d",
		"cluster-1.example.com",
		dashAt46,
		strings.Repeat("a", 45) + "--" + strings.Repeat("b", 20),
		strings.Repeat("a", 44) + "." + "-" + strings.Repeat("b", 20),
		strings.Repeat("a-", 126) + "a",
		strings.Repeat("a.", 126) + "a",
		strings.Repeat("-", 80),
	}
	generations := []int64{0, 1, 2, 10, 99999, math.MaxInt64, -1, math.MinInt64}
	kinds := []string{kindCluster, kindMachine, "TerraformMachinePool"}
	actions := []v1alpha1.JobAction{v1alpha1.JobActionApply, v1alpha1.JobActionDestroy}
	for _, n := range names {
		for _, g := range generations {
			for _, k := range kinds {
				for _, a := range actions {
					requireValidJobName(t, Name(k, n, uidA, a, g))
				}
			}
		}
	}

	// The 46th character is a '-': it is cut off, not left before the suffix.
	name := Name(kindCluster, dashAt46, uidA, v1alpha1.JobActionApply, 1)
	require.True(t, strings.HasPrefix(name, strings.Repeat("a", 45)+"-apply-1-"), name)
	require.Len(t, name, 62)

	// A long name fills exactly 63 characters.
	name = Name(kindCluster, sub253, uidA, v1alpha1.JobActionApply, 1)
	require.Len(t, name, 63)
	require.True(t, strings.HasPrefix(name, strings.Repeat("a", 46)+"-apply-1-"), name)

	// The longest suffix (destroy, max int64) still leaves the name a prefix.
	name = Name(kindCluster, sub253, uidA, v1alpha1.JobActionDestroy, math.MaxInt64)
	require.Len(t, name, 63)
	require.True(t, strings.HasPrefix(name, strings.Repeat("a", 26)+"-destroy-9223372036854775807-"), name)
}

func TestNameJ1TotalOnInvalidInput(t *testing.T) {
	for _, n := range []string{"", "-", "...", "UPPER.Case", "ünïcödé", "a b/c", "_x_", strings.Repeat("é", 200)} {
		for _, a := range []v1alpha1.JobAction{v1alpha1.JobActionApply, "", "-", "Plan!", v1alpha1.JobAction(strings.Repeat("x", 100))} {
			for _, g := range []int64{1, -1, math.MinInt64} {
				requireValidJobName(t, Name(kindCluster, n, "", a, g))
			}
		}
	}
	require.True(t, strings.HasPrefix(Name(kindCluster, "UPPER.Case", uidA, v1alpha1.JobActionApply, 1), "upper-case-apply-1-"))
}

func TestNameJ1Distinct(t *testing.T) {
	long := strings.Repeat("a", 100)
	base := Name(kindCluster, "prod", uidA, v1alpha1.JobActionApply, 3)
	for what, other := range map[string]string{
		"another UID (a re-created object)":      Name(kindCluster, "prod", uidB, v1alpha1.JobActionApply, 3),
		"another kind with the same name":        Name(kindMachine, "prod", uidA, v1alpha1.JobActionApply, 3),
		"destroy instead of apply":               Name(kindCluster, "prod", uidA, v1alpha1.JobActionDestroy, 3),
		"another generation":                     Name(kindCluster, "prod", uidA, v1alpha1.JobActionApply, 4),
		"another name":                           Name(kindCluster, "prod2", uidA, v1alpha1.JobActionApply, 3),
		"'.' and '-' map alike but are distinct": Name(kindCluster, "pr.od", uidA, v1alpha1.JobActionApply, 3),
	} {
		require.NotEqual(t, base, other, what)
	}
	require.NotEqual(t,
		Name(kindCluster, "pr.od", uidA, v1alpha1.JobActionApply, 3),
		Name(kindCluster, "pr-od", uidA, v1alpha1.JobActionApply, 3))

	// Names sharing a prefix longer than what fits, even with the same UID
	// (as in a test fixture), do not collide.
	require.NotEqual(t,
		Name(kindCluster, long+"-one", uidA, v1alpha1.JobActionApply, 1),
		Name(kindCluster, long+"-two", uidA, v1alpha1.JobActionApply, 1))
	require.NotEqual(t,
		Name(kindCluster, long+"-one", uidA, v1alpha1.JobActionApply, 1),
		Name(kindCluster, long+"-one", uidB, v1alpha1.JobActionApply, 1))

	// Same cluster and machine name, same UID (impossible in a cluster, but
	// the kind alone must separate them).
	require.NotEqual(t,
		Name(kindCluster, "x", "", v1alpha1.JobActionApply, 1),
		Name(kindMachine, "x", "", v1alpha1.JobActionApply, 1))

	// Length-prefixed hashing: moving a character between fields changes
	// the hash.
	require.NotEqual(t, nameHash("ab", "c", "", "apply", 1), nameHash("a", "bc", "", "apply", 1))
}

// FuzzName: for any owner name that is a valid DNS subdomain (what the API
// server admits), Name is a valid DNS label of at most 63 characters, and
// deterministic. Name is total, so the fuzzer checks every input, not only
// valid names.
func FuzzName(f *testing.F) {
	f.Add("prod", "TerraformCluster", "0b6c1f0e", int64(1), false)
	f.Add("prod.eu-west-1", "TerraformMachine", "", int64(math.MaxInt64), true)
	f.Add(strings.Repeat("a", 45)+"-"+strings.Repeat("b", 40), "TerraformMachinePool", "x", int64(1), false)
	f.Add(strings.Repeat("a.", 126)+"a", "TerraformCluster", "u", int64(-1), true)
	f.Fuzz(func(t *testing.T, ownerName, kind, uid string, generation int64, destroy bool) {
		action := v1alpha1.JobActionApply
		if destroy {
			action = v1alpha1.JobActionDestroy
		}
		name := Name(kind, ownerName, types.UID(uid), action, generation)
		if len(name) > MaxNameLength || len(validation.IsDNS1123Label(name)) != 0 {
			t.Fatalf("Name(%q, %q, %q, %q, %d) = %q: not a DNS label of at most %d characters (valid subdomain input: %v)",
				kind, ownerName, uid, action, generation, name, MaxNameLength, len(validation.IsDNS1123Subdomain(ownerName)) == 0)
		}
		if again := Name(kind, ownerName, types.UID(uid), action, generation); again != name {
			t.Fatalf("Name is not deterministic: %q then %q", name, again)
		}
		if len(validation.IsDNS1123Subdomain(ownerName)) == 0 && generation >= 0 {
			requireReadable(t, ownerName, name)
		}

		// Random strings are rarely valid subdomains, so also check the
		// subdomain derived from this input.
		sub := toSubdomain(ownerName)
		if errs := validation.IsDNS1123Subdomain(sub); len(errs) != 0 {
			t.Fatalf("test bug: toSubdomain(%q) = %q: %v", ownerName, sub, errs)
		}
		name = Name(kind, sub, types.UID(uid), action, max(generation, 0))
		requireValidJobName(t, name)
		requireReadable(t, sub, name)
		if again := Name(kind, sub, types.UID(uid), action, max(generation, 0)); again != name {
			t.Fatalf("Name is not deterministic: %q then %q", name, again)
		}
	})
}

// requireReadable checks that the Job name of a valid owner name has the
// form <name-prefix>-<action>-<generation>-<hash> and that its prefix comes
// from the owner's name.
func requireReadable(t *testing.T, ownerName, name string) {
	t.Helper()
	m := readableName.FindStringSubmatch(name)
	if m == nil {
		t.Fatalf("Name(%q) = %q: not <name>-<action>-<generation>-<hash>", ownerName, name)
	}
	if !strings.HasPrefix(strings.ReplaceAll(ownerName, ".", "-"), m[1]) {
		t.Fatalf("Name(%q) = %q: prefix %q is not from the owner's name", ownerName, name, m[1])
	}
}

// toSubdomain maps any string to a valid DNS subdomain (a valid owner name).
func toSubdomain(s string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789.-"
	b := make([]byte, len(s))
	for i := range len(s) {
		b[i] = alphabet[int(s[i])%len(alphabet)]
	}
	var labels []string
	for _, l := range strings.Split(string(b), ".") {
		if l = strings.Trim(l[:min(len(l), 63)], "-"); l != "" {
			labels = append(labels, l)
		}
	}
	out := strings.Join(labels, ".")
	out = strings.TrimRight(out[:min(len(out), 253)], "-.")
	if out == "" {
		return "a"
	}
	return out
}

// SPEC O3: every Job name the owner's Jobs get is found again from any of
// its pods' names, however long the owner's name (the pod keeps 58
// characters of the Job's); another owner's, or another UID's, is not.
func TestJobOfPodRoundTrip(t *testing.T) {
	pod := func(job string) string {
		p := job + "-"
		if len(p) > podPrefixLength {
			p = p[:podPrefixLength]
		}
		return p + "q1w2e"
	}
	for n := 1; n <= 70; n++ {
		owner := strings.Repeat("ab.c-", 14)[:n]
		for _, job := range []string{
			Name("TerraformCluster", owner, "u1", v1alpha1.JobActionApply, 1),
			Name("TerraformCluster", owner, "u1", v1alpha1.JobActionDrift, 987654321),
			AttemptName("TerraformCluster", owner, "u1", v1alpha1.JobActionDestroy, 12, 3),
			AttemptName("TerraformCluster", owner, "u1", v1alpha1.JobActionRestore, 1, 1000000),
			ReapplyName("TerraformCluster", owner, "u1", 42, 7),
			Name("TerraformCluster", owner, "u1", v1alpha1.JobActionPlan, 9223372036854775807),
		} {
			got, ok := JobOfPod("TerraformCluster", owner, "u1", pod(job))
			if !ok || got != job {
				t.Fatalf("owner %q: JobOfPod(%q) = %q, %v; want %q", owner, pod(job), got, ok, job)
			}
			if _, ok := JobOfPod("TerraformCluster", owner, "u2", pod(job)); ok {
				t.Fatalf("owner %q: the pod of Job %q is claimed under another UID", owner, job)
			}
			if _, ok := JobOfPod("TerraformMachine", owner, "u1", pod(job)); ok {
				t.Fatalf("owner %q: the pod of Job %q is claimed by another kind", owner, job)
			}
			if _, ok := JobOfPod("TerraformCluster", owner, "u1", job); ok && len(job) < podPrefixLength {
				t.Fatalf("owner %q: the Job's own name %q is taken for a pod's", owner, job)
			}
		}
	}
}

// SPEC O3: a lock holder's pod name is written by whoever may write the
// Lease; one whose last five characters are not what the API server adds
// to a generateName (lower-case letters and digits) is no pod of a Job,
// and never reaches a field selector.
func TestJobOfPodRefusesAForgedSuffix(t *testing.T) {
	job := Name("TerraformCluster", "c1", "u1", v1alpha1.JobActionApply, 1)
	_, ok := JobOfPod("TerraformCluster", "c1", "u1", job+"-q1w2e")
	require.True(t, ok)
	for _, suffix := range []string{"x,a=b", "Q1W2E", "q1w2.", "q1 w2"} {
		if _, ok := JobOfPod("TerraformCluster", "c1", "u1", job+"-"+suffix); ok {
			t.Errorf("JobOfPod accepts the suffix %q", suffix)
		}
		if PodOfJob(job+"-"+suffix, job) {
			t.Errorf("PodOfJob accepts the suffix %q", suffix)
		}
	}
}
