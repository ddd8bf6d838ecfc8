package runclass

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

var testDigest = "sha256:" + strings.Repeat("ab", 32)

// TestDigestOfO6: only a pullable repository digest is pinned.
func TestDigestOfO6(t *testing.T) {
	for _, tt := range []struct{ imageID, want string }{
		{"registry.example/m@" + testDigest, testDigest},
		{"docker-pullable://registry.example/m@" + testDigest, testDigest},
		{"docker.io/library/m@" + testDigest, testDigest},
		{testDigest, ""}, // a local image's configuration ID: not pullable
		{"registry.example/m@sha256:abc", ""},
		{"registry.example/m@" + strings.ToUpper(testDigest), ""},
		{"registry.example/m:1", ""},
		{"", ""},
		{strings.Repeat("a", 2000) + "@" + testDigest, ""},
	} {
		require.Equal(t, tt.want, DigestOf(tt.imageID), tt.imageID)
	}
}

func TestPinnedRefO6(t *testing.T) {
	for _, tt := range []struct{ image, want string }{
		{"registry.example/modules/net:v1", "registry.example/modules/net@" + testDigest},
		{"registry.example:5000/net:v1", "registry.example:5000/net@" + testDigest},
		{"registry.example:5000/net", "registry.example:5000/net@" + testDigest},
		{"net", "net@" + testDigest},
		{"net:v1@sha256:" + strings.Repeat("0", 64), "net@" + testDigest},
	} {
		require.Equal(t, tt.want, PinnedRef(tt.image, testDigest), tt.image)
	}
}

// TestRunImageO6: a machine pinned for its spec image runs it by digest;
// clusters and pools, and a machine whose spec names another image, run
// the spec's image.
func TestRunImageO6(t *testing.T) {
	const img = "registry.example/net:v1"
	pinned := &v1alpha1.SourceStatus{Image: img, ImageDigest: testDigest}
	require.Equal(t, "registry.example/net@"+testDigest, RunImage(v1alpha1.KindTerraformMachine, img, pinned))
	require.Equal(t, img, RunImage(v1alpha1.KindTerraformMachine, img, nil))
	require.Equal(t, "registry.example/net:v2", RunImage(v1alpha1.KindTerraformMachine, "registry.example/net:v2", pinned))
	require.Equal(t, img, RunImage(v1alpha1.KindTerraformCluster, img, pinned))
	require.Equal(t, img, RunImage(v1alpha1.KindTerraformMachinePool, img, pinned))
}

// TestRepinO6: a machine pins once per image; a cluster or pool on each
// apply that ran another digest.
func TestRepinO6(t *testing.T) {
	const img = "registry.example/net:v1"
	other := "sha256:" + strings.Repeat("cd", 32)
	old := &v1alpha1.SourceStatus{Image: img, ImageDigest: testDigest}
	for _, tt := range []struct {
		name        string
		kind        string
		src         *v1alpha1.SourceStatus
		image, dig  string
		want        *v1alpha1.SourceStatus
		wantChanged bool
	}{
		{"machine, first success", v1alpha1.KindTerraformMachine, nil, img, testDigest, old, true},
		{"machine, pinned: never again for that image", v1alpha1.KindTerraformMachine, old, img, other, old, false},
		{"machine, a new image pins anew", v1alpha1.KindTerraformMachine, old, "registry.example/net:v2", other,
			&v1alpha1.SourceStatus{Image: "registry.example/net:v2", ImageDigest: other}, true},
		{"cluster re-pins", v1alpha1.KindTerraformCluster, old, img, other, &v1alpha1.SourceStatus{Image: img, ImageDigest: other}, true},
		{"pool, same digest: no change", v1alpha1.KindTerraformMachinePool, old, img, testDigest, old, false},
		{"no digest", v1alpha1.KindTerraformCluster, old, img, "", old, false},
		{"ran by digest already", v1alpha1.KindTerraformCluster, nil, "registry.example/net@" + testDigest, testDigest, nil, false},
	} {
		got, changed := Repin(tt.kind, tt.src, tt.image, tt.dig)
		require.Equal(t, tt.want, got, tt.name)
		require.Equal(t, tt.wantChanged, changed, tt.name)
	}
}
