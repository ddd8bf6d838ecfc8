package credentials

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// dnsName returns a valid DNS subdomain of exactly n characters, made of
// 62-character labels, so that long names look like real identity names.
func dnsName(n int) string {
	s := strings.Repeat(strings.Repeat("a", 62)+".", n/63+1)[:n]
	if strings.HasSuffix(s, ".") {
		s = s[:n-1] + "b"
	}
	return s
}

func TestMirrorName(t *testing.T) {
	const prefix = "captf-creds-"
	hashed := func(identity string) string {
		sum := sha256.Sum256([]byte(identity))
		return prefix + hex.EncodeToString(sum[:])[:16]
	}
	id253 := dnsName(253 - len(prefix)) // mirror name of exactly 253
	id254 := dnsName(254 - len(prefix)) // mirror name of 254: hashed
	for _, tc := range []struct {
		name     string
		identity string
		want     string
	}{
		{"M1/short name kept", "aws-prod", "captf-creds-aws-prod"},
		{"M1/dotted name kept", "aws.prod.example.com", "captf-creds-aws.prod.example.com"},
		{"M1/253 characters kept verbatim", id253, prefix + id253},
		{"M1/254 characters hashed", id254, hashed(id254)},
		{"M1/253-character identity hashed", dnsName(253), hashed(dnsName(253))},
		// Independent of the code under test: sha256("a"*242) computed with Python.
		{"M1/hashed known vector", strings.Repeat("a", 242), prefix + "8fded59c427b2e68"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MirrorName(tc.identity)
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), 253)
			require.Empty(t, validation.IsDNS1123Subdomain(got))
			require.Equal(t, got, MirrorName(tc.identity), "deterministic")
		})
	}

	t.Run("M1/boundary lengths", func(t *testing.T) {
		require.Len(t, MirrorName(id253), 253)
		require.Len(t, MirrorName(id254), len(prefix)+16)
		require.Equal(t, 28, len(MirrorName(id254)))
		require.Regexp(t, `^captf-creds-[0-9a-f]{16}$`, MirrorName(id254))
	})

	t.Run("M1/different long names give different hashes", func(t *testing.T) {
		a := dnsName(300)
		b := a[:299] + "c"
		require.NotEqual(t, MirrorName(a), MirrorName(b))
	})
}

func TestSourceHash(t *testing.T) {
	// be64 writes n as 8 big-endian bytes, by hand.
	be64 := func(n int) []byte {
		return []byte{0, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
	// The M4 encoding of {"user": "admin", "pass": "s3cret"}, keys sorted.
	var enc []byte
	enc = append(enc, be64(4)...)
	enc = append(enc, "pass"...)
	enc = append(enc, be64(6)...)
	enc = append(enc, "s3cret"...)
	enc = append(enc, be64(4)...)
	enc = append(enc, "user"...)
	enc = append(enc, be64(5)...)
	enc = append(enc, "admin"...)
	sum := sha256.Sum256(enc)
	twoKeys := map[string][]byte{"user": []byte("admin"), "pass": []byte("s3cret")}

	t.Run("M4/known vector, hand-encoded", func(t *testing.T) {
		require.Equal(t, hex.EncodeToString(sum[:]), SourceHash(twoKeys))
	})
	t.Run("M4/known vector, computed with Python", func(t *testing.T) {
		require.Equal(t, "844a4b62f7964b2c3b73d5ec4002f49faf890b3ef3f962845f66c32d2a6d5ebb", SourceHash(twoKeys))
	})
	t.Run("M4/nil and empty hash the same, as sha256 of nothing", func(t *testing.T) {
		const empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
		require.Equal(t, empty, SourceHash(nil))
		require.Equal(t, empty, SourceHash(map[string][]byte{}))
	})
	t.Run("M4/key order independent", func(t *testing.T) {
		many := map[string][]byte{}
		for _, k := range strings.Split("q w e r t y u i o p a s d f g h j k l z x c v b n m", " ") {
			many[k] = []byte(k + k)
		}
		want := SourceHash(many)
		// Go randomises map iteration, so repeated calls walk different orders.
		for range 50 {
			require.Equal(t, want, SourceHash(many))
		}
		require.Equal(t, SourceHash(map[string][]byte{"pass": []byte("s3cret"), "user": []byte("admin")}), SourceHash(twoKeys))
	})
	t.Run("M4/length prefixes prevent ambiguity", func(t *testing.T) {
		require.NotEqual(t,
			SourceHash(map[string][]byte{"a": []byte("bc")}),
			SourceHash(map[string][]byte{"ab": []byte("c")}))
		require.NotEqual(t,
			SourceHash(map[string][]byte{"a": []byte("b"), "c": []byte("d")}),
			SourceHash(map[string][]byte{"a": []byte("bcd")}))
	})
	t.Run("M4/empty value differs from absent key", func(t *testing.T) {
		require.NotEqual(t, SourceHash(nil), SourceHash(map[string][]byte{"a": {}}))
		require.NotEqual(t, SourceHash(map[string][]byte{"b": []byte("x")}),
			SourceHash(map[string][]byte{"a": nil, "b": []byte("x")}))
	})
	t.Run("M4/nil and empty value hash the same", func(t *testing.T) {
		require.Equal(t, SourceHash(map[string][]byte{"a": nil}), SourceHash(map[string][]byte{"a": {}}))
	})
	t.Run("M4/value change changes the hash", func(t *testing.T) {
		require.NotEqual(t, SourceHash(twoKeys), SourceHash(map[string][]byte{"user": []byte("admin"), "pass": []byte("s3creT")}))
	})
}

func TestDesiredMirror(t *testing.T) {
	source := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA"), "AWS_SECRET_ACCESS_KEY": []byte("shh")}
	hash := SourceHash(source)

	t.Run("M2,M3/exact object", func(t *testing.T) {
		got := DesiredMirror("aws-prod", "team-a", source)
		want := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "captf-creds-aws-prod",
				Namespace: "team-a",
				Labels:    map[string]string{"captf.io/mirrored": "true", "captf.io/managed": "true"},
				Annotations: map[string]string{
					"captf.io/identity":    "aws-prod",
					"captf.io/source-hash": hash,
				},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA"), "AWS_SECRET_ACCESS_KEY": []byte("shh")},
		}
		require.Equal(t, want, got)
		require.Empty(t, got.OwnerReferences, "M5: callers add owner references")
	})

	t.Run("M2/data is a copy, never an alias", func(t *testing.T) {
		src := map[string][]byte{"k": []byte("value")}
		got := DesiredMirror("id", "ns", src)
		src["k"][0] = 'X'
		src["new"] = []byte("n")
		require.Equal(t, map[string][]byte{"k": []byte("value")}, got.Data)
	})

	t.Run("M2/nil source data gives no keys and the empty hash", func(t *testing.T) {
		got := DesiredMirror("id", "ns", nil)
		require.Empty(t, got.Data)
		require.Equal(t, SourceHash(nil), got.Annotations[v1alpha1.AnnotationSourceHash])
	})

	t.Run("M2/empty value kept as an empty, non-nil value", func(t *testing.T) {
		got := DesiredMirror("id", "ns", map[string][]byte{"k": nil})
		require.Contains(t, got.Data, "k")
		require.NotNil(t, got.Data["k"])
		require.Empty(t, got.Data["k"])
	})

	t.Run("M1/long identity gives the hashed name", func(t *testing.T) {
		id := dnsName(250)
		got := DesiredMirror(id, "ns", nil)
		require.Equal(t, MirrorName(id), got.Name)
		require.Equal(t, id, got.Annotations[v1alpha1.AnnotationIdentity], "the annotation keeps the full name")
	})
}

func TestIsForeign(t *testing.T) {
	secret := func(labels, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "captf-creds-id", Labels: labels, Annotations: annotations}}
	}
	mirrored := map[string]string{"captf.io/mirrored": "true"}
	ours := map[string]string{"captf.io/identity": "id"}
	for _, tc := range []struct {
		name     string
		existing *corev1.Secret
		identity string
		want     bool
	}{
		{"M7/our mirror", secret(map[string]string{"captf.io/mirrored": "true", "captf.io/managed": "true"}, ours), "id", false},
		{"M7/our mirror without the managed label is still ours", secret(mirrored, ours), "id", false},
		{"M7/no labels, no annotations", secret(nil, nil), "id", true},
		{"M7/identity annotation without the mirrored label", secret(nil, ours), "id", true},
		{"M7/mirrored label not true", secret(map[string]string{"captf.io/mirrored": "false"}, ours), "id", true},
		{"M7/mirrored label empty", secret(map[string]string{"captf.io/mirrored": ""}, ours), "id", true},
		{"M7/mirror of another identity", secret(mirrored, map[string]string{"captf.io/identity": "other"}), "id", true},
		{"M7/mirrored label but no identity annotation", secret(mirrored, nil), "id", true},
		{"M7/mirrored label and empty identity annotation", secret(mirrored, map[string]string{"captf.io/identity": ""}), "id", true},
		{"M7/empty identity is never ours", secret(mirrored, map[string]string{"captf.io/identity": ""}), "", true},
		{"M7/nothing holds the name", nil, "id", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, IsForeign(tc.existing, tc.identity))
		})
	}
}

func TestCompareMirror(t *testing.T) {
	desired := DesiredMirror("id", "ns", map[string][]byte{"k": []byte("topsecret")})
	for _, tc := range []struct {
		name   string
		mutate func(s *corev1.Secret)
		want   MirrorDiff
		str    string
	}{
		{"M6/unchanged", func(*corev1.Secret) {}, MirrorDiff{}, "none"},
		{"M6/extra labels and annotations ignored", func(s *corev1.Secret) {
			s.Labels["team"] = "a"
			s.Annotations["note"] = "x"
			s.OwnerReferences = []metav1.OwnerReference{OwnerReference("v1", "ConfigMap", "c", "u")}
		}, MirrorDiff{}, "none"},
		{"M6/empty type counts as Opaque", func(s *corev1.Secret) { s.Type = "" }, MirrorDiff{}, "none"},
		{"M6/data value", func(s *corev1.Secret) { s.Data["k"] = []byte("w") }, MirrorDiff{Data: true}, "data"},
		{"M6/data key added", func(s *corev1.Secret) { s.Data["k2"] = []byte("topsecret") }, MirrorDiff{Data: true}, "data"},
		{"M6/data key removed", func(s *corev1.Secret) { delete(s.Data, "k") }, MirrorDiff{Data: true}, "data"},
		{"M6/data key renamed", func(s *corev1.Secret) { s.Data = map[string][]byte{"j": []byte("topsecret")} }, MirrorDiff{Data: true}, "data"},
		{"M6/hash annotation", func(s *corev1.Secret) { s.Annotations["captf.io/source-hash"] = "old" }, MirrorDiff{SourceHash: true}, "annotation captf.io/source-hash"},
		{"M6/hash annotation missing", func(s *corev1.Secret) { delete(s.Annotations, "captf.io/source-hash") }, MirrorDiff{SourceHash: true}, "annotation captf.io/source-hash"},
		{"M6/identity annotation", func(s *corev1.Secret) { s.Annotations["captf.io/identity"] = "other" }, MirrorDiff{Identity: true}, "annotation captf.io/identity"},
		{"M6/mirrored label", func(s *corev1.Secret) { s.Labels["captf.io/mirrored"] = "false" }, MirrorDiff{LabelMirrored: true}, "label captf.io/mirrored"},
		{"M6/managed label missing", func(s *corev1.Secret) { delete(s.Labels, "captf.io/managed") }, MirrorDiff{LabelManaged: true}, "label captf.io/managed"},
		{"M6/managed label empty", func(s *corev1.Secret) { s.Labels["captf.io/managed"] = "" }, MirrorDiff{LabelManaged: true}, "label captf.io/managed"},
		{"M6/type", func(s *corev1.Secret) { s.Type = corev1.SecretTypeBasicAuth }, MirrorDiff{Type: true}, "type"},
		{"M6/several", func(s *corev1.Secret) {
			s.Data = nil
			s.Labels = nil
			s.Annotations = nil
		}, MirrorDiff{Data: true, SourceHash: true, Identity: true, LabelMirrored: true, LabelManaged: true},
			"data, annotation captf.io/source-hash, annotation captf.io/identity, label captf.io/mirrored, label captf.io/managed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			existing := desired.DeepCopy()
			tc.mutate(existing)
			before := existing.DeepCopy()
			got := CompareMirror(existing, desired)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want != MirrorDiff{}, got.Any())
			require.Equal(t, tc.want.Type, got.NeedsRecreate())
			require.Equal(t, tc.str, got.String())
			require.NotContains(t, got.String(), "topsecret", "X1: no values")
			require.Equal(t, before, existing, "existing not mutated")
		})
	}

	t.Run("M6/nil and empty data are equal", func(t *testing.T) {
		empty := DesiredMirror("id", "ns", nil)
		existing := empty.DeepCopy()
		existing.Data = nil
		require.False(t, CompareMirror(existing, empty).Any())
		existing.Data = map[string][]byte{}
		require.False(t, CompareMirror(existing, empty).Any())
	})
	t.Run("M6/nil and empty values are equal", func(t *testing.T) {
		d := DesiredMirror("id", "ns", map[string][]byte{"k": {}})
		existing := d.DeepCopy()
		existing.Data["k"] = nil
		require.False(t, CompareMirror(existing, d).Any())
	})
}

func TestApplyDesired(t *testing.T) {
	desired := DesiredMirror("id", "ns", map[string][]byte{"k": []byte("new")})
	existing := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "captf-creds-id",
			Namespace:       "ns",
			ResourceVersion: "42",
			UID:             "mirror-uid",
			Labels:          map[string]string{"captf.io/mirrored": "true", "team": "a"},
			Annotations:     map[string]string{"captf.io/identity": "id", "captf.io/source-hash": "old", "note": "keep"},
			OwnerReferences: []metav1.OwnerReference{OwnerReference("infrastructure.cluster.x-k8s.io/v1alpha1", "TerraformMachine", "m", "u1")},
		},
		Type:       "",
		Data:       map[string][]byte{"k": []byte("old"), "gone": []byte("x")},
		StringData: map[string]string{"k": "stale"},
	}
	before := existing.DeepCopy()

	got := ApplyDesired(existing, desired)

	t.Run("M6/existing not mutated", func(t *testing.T) {
		require.Equal(t, before, existing)
	})
	t.Run("M6/result matches desired", func(t *testing.T) {
		require.False(t, CompareMirror(got, desired).Any(), CompareMirror(got, desired).String())
		require.Equal(t, desired.Data, got.Data)
		require.Equal(t, corev1.SecretTypeOpaque, got.Type)
		require.Nil(t, got.StringData)
	})
	t.Run("M6/foreign labels and annotations kept, ours set", func(t *testing.T) {
		require.Equal(t, map[string]string{"captf.io/mirrored": "true", "captf.io/managed": "true", "team": "a"}, got.Labels)
		require.Equal(t, map[string]string{
			"captf.io/identity":    "id",
			"captf.io/source-hash": desired.Annotations["captf.io/source-hash"],
			"note":                 "keep",
		}, got.Annotations)
	})
	t.Run("M5/owner references and identity of the object kept", func(t *testing.T) {
		require.Equal(t, existing.OwnerReferences, got.OwnerReferences)
		require.Equal(t, existing.ObjectMeta.ResourceVersion, got.ResourceVersion)
		require.Equal(t, existing.UID, got.UID)
	})
	t.Run("M2/no aliasing of desired data", func(t *testing.T) {
		got.Data["k"][0] = 'X'
		require.Equal(t, []byte("new"), desired.Data["k"])
	})
	t.Run("M6/nil labels and annotations", func(t *testing.T) {
		bare := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "captf-creds-id", Namespace: "ns"}}
		out := ApplyDesired(bare, desired)
		require.False(t, CompareMirror(out, desired).Any())
		require.Nil(t, bare.Labels)
	})
}
