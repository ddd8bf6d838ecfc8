package jobs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// O4: a Job records the TerraformCluster whose cap it counts under, so the
// cache alone can count a cluster's Jobs; without one it records nothing.
func TestBuildO4ClusterAnnotation(t *testing.T) {
	p := params(v1alpha1.JobActionApply)
	_, ok := Build(p).Annotations[v1alpha1.AnnotationJobCluster]
	require.False(t, ok)
	p.Cluster = "prod"
	require.Equal(t, "prod", Build(p).Annotations[v1alpha1.AnnotationJobCluster])
}
