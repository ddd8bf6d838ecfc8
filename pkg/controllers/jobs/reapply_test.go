package jobs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// C6: every re-apply of a generation has its own deterministic Job name,
// distinct from the generation's first apply; names stay valid DNS labels.
func TestReapplyNameC6(t *testing.T) {
	for _, owner := range []string{"demo", strings.Repeat("a", 253), "prod.eu-west-1"} {
		first := Name("TerraformCluster", owner, "uid-1", v1alpha1.JobActionApply, 3)
		r1 := ReapplyName("TerraformCluster", owner, "uid-1", 3, 1)
		r2 := ReapplyName("TerraformCluster", owner, "uid-1", 3, 2)
		require.Equal(t, r1, ReapplyName("TerraformCluster", owner, "uid-1", 3, 1), "deterministic")
		require.NotEqual(t, first, r1)
		require.NotEqual(t, r1, r2)
		for _, n := range []string{first, r1, r2} {
			require.Empty(t, validation.IsDNS1123Label(n), n)
		}
		require.Contains(t, r1, "-apply-3-r1-")
	}
	require.Equal(t, Name("TerraformCluster", "demo", "uid-1", v1alpha1.JobActionApply, 3),
		name("TerraformCluster", "demo", "uid-1", v1alpha1.JobActionApply, 3, 0), "a first apply's name is unchanged by re-apply support")
}

// C5, C6: the Job records its identity and takes the re-apply name.
func TestBuildIdentityAndReapply(t *testing.T) {
	p := Params{OwnerAPIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", OwnerKind: "TerraformCluster", OwnerName: "demo",
		OwnerUID: "uid-1", Namespace: "team-a", Generation: 2, Action: v1alpha1.JobActionApply, ModuleImage: "m", RunnerImage: "r",
		MirrorName: "captf-creds-aws", SourceHash: "abc", Identity: "aws", Reapply: 1}
	j := Build(p)
	require.Equal(t, "aws", j.Annotations[v1alpha1.AnnotationIdentity])
	require.Equal(t, ReapplyName("TerraformCluster", "demo", "uid-1", 2, 1), j.Name)
	p.Identity, p.Reapply = "", 0
	j = Build(p)
	require.NotContains(t, j.Annotations, v1alpha1.AnnotationIdentity)
	require.Equal(t, Name("TerraformCluster", "demo", "uid-1", v1alpha1.JobActionApply, 2), j.Name)
}
