package workload

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// TestDeletionPolicyDestroyAndAliasO5: upstream's Destroy (A1-72), captf's
// earlier name Delete and the unset default all delete an object through
// a destroy Job; only Retain deletes it without one (SPEC O5).
func TestDeletionPolicyDestroyAndAliasO5(t *testing.T) {
	for _, tc := range []struct {
		policy  v1alpha1.DeletionPolicy
		destroy bool
	}{
		{"", true},
		{v1alpha1.DeletionPolicyDestroy, true},
		{v1alpha1.DeletionPolicyDelete, true},
		{v1alpha1.DeletionPolicyRetain, false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", deleting, func(c *v1alpha1.TerraformCluster) { c.Spec.DeletionPolicy = tc.policy })
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
				newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
				newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			if tc.destroy {
				require.Equal(t, []string{jobs.Name(v1alpha1.KindTerraformCluster, "c1", c1.UID, v1alpha1.JobActionDestroy, 1)}, f.createdJobNames())
			} else {
				require.Empty(t, f.createdJobNames(), "Retain runs no destroy Job")
			}
		})
	}
}
