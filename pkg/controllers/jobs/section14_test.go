package jobs

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// C6, J1: ReapplyName stays a valid DNS label of at most 63 characters for
// any owner name, generation and re-apply number, keeps the readable
// "-apply-<generation>-r<n>-" part, and never equals the generation's first
// apply Job.
func TestReapplyNameC6Extremes(t *testing.T) {
	owners := []string{"", "c1", strings.Repeat("a", 253), strings.Repeat("x.", 126) + "y", "UPPER_case", "-.-"}
	gens := []int64{0, 1, 42, math.MaxInt64, -1, math.MinInt64}
	ns := []int{1, 2, 9, 10, 999, math.MaxInt32, math.MaxInt}
	for _, owner := range owners {
		for _, g := range gens {
			first := Name("TerraformMachinePool", owner, "uid", v1alpha1.JobActionApply, g)
			for _, n := range ns {
				got := ReapplyName("TerraformMachinePool", owner, "uid", g, n)
				require.Empty(t, validation.IsDNS1123Label(got), "owner %q gen %d n %d: %q", owner, g, n, got)
				require.LessOrEqual(t, len(got), MaxNameLength)
				require.NotEqual(t, first, got)
				require.Contains(t, got, "apply-"+strconv.FormatInt(g, 10)+"-r"+strconv.Itoa(n)+"-")
			}
		}
	}
}

// C6: the re-apply Jobs of one generation all have distinct names, distinct
// from every other owner's, kind's and generation's.
func TestReapplyNameC6Distinct(t *testing.T) {
	seen := map[string]string{}
	add := func(name, what string) {
		t.Helper()
		prev, dup := seen[name]
		require.False(t, dup, "%s and %s share the Job name %s", prev, what, name)
		seen[name] = what
	}
	for _, kind := range []string{"TerraformCluster", "TerraformMachine"} {
		for _, uid := range []types.UID{"uid-1", "uid-2"} {
			for g := int64(1); g <= 3; g++ {
				add(Name(kind, "demo", uid, v1alpha1.JobActionApply, g), kind+string(uid)+" first")
				add(Name(kind, "demo", uid, v1alpha1.JobActionDestroy, g), kind+string(uid)+" destroy")
				for n := 1; n <= 100; n++ {
					add(ReapplyName(kind, "demo", uid, g, n), kind+string(uid)+" r"+strconv.Itoa(n))
				}
			}
		}
	}
}

// C5: every Job records the identity and the source hash it starts with,
// the destroy Job as well as the apply and re-apply Jobs.
func TestBuildC5AnnotationsOnEveryAction(t *testing.T) {
	for _, tc := range []struct {
		action  v1alpha1.JobAction
		reapply int
	}{{v1alpha1.JobActionApply, 0}, {v1alpha1.JobActionApply, 3}, {v1alpha1.JobActionDestroy, 0}} {
		t.Run(string(tc.action)+strconv.Itoa(tc.reapply), func(t *testing.T) {
			j := Build(Params{
				OwnerAPIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", OwnerKind: "TerraformCluster", OwnerName: "demo",
				OwnerUID: "uid-1", Namespace: "team-a", Generation: 4, Action: tc.action, ModuleImage: "m", RunnerImage: "r",
				MirrorName: "captf-creds-aws", SourceHash: "abc123", Identity: "aws", Reapply: tc.reapply,
			})
			require.Equal(t, "abc123", j.Annotations[v1alpha1.AnnotationSourceHash])
			require.Equal(t, "abc123", SourceHashOf(j))
			require.Equal(t, "aws", j.Annotations[v1alpha1.AnnotationIdentity])
			require.Equal(t, string(tc.action), j.Annotations[v1alpha1.AnnotationJobAction])
			require.Equal(t, "4", j.Annotations[v1alpha1.AnnotationJobGeneration])
			g, ok := GenerationOf(j)
			require.True(t, ok)
			require.Equal(t, int64(4), g)
			require.Equal(t, tc.action, ActionOf(j))
			want := Name("TerraformCluster", "demo", "uid-1", tc.action, 4)
			if tc.reapply > 0 {
				want = ReapplyName("TerraformCluster", "demo", "uid-1", 4, tc.reapply)
			}
			require.Equal(t, want, j.Name)
		})
	}
}
