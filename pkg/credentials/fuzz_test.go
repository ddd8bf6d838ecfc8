package credentials

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func FuzzMirrorName(f *testing.F) {
	for _, s := range []string{"a", "aws-prod", "a.b-c.d", dnsName(241), dnsName(242), dnsName(253), strings.Repeat("a", 300), "", "UPPER", "-x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, identity string) {
		got := MirrorName(identity)
		require.Equal(t, got, MirrorName(identity), "deterministic")
		require.LessOrEqual(t, len(got), 253, "M1: always a valid length")
		require.True(t, strings.HasPrefix(got, v1alpha1.MirrorNamePrefix))
		if len(v1alpha1.MirrorNamePrefix)+len(identity) <= 253 {
			require.Equal(t, v1alpha1.MirrorNamePrefix+identity, got)
		} else {
			require.Len(t, got, len(v1alpha1.MirrorNamePrefix)+16)
		}
		if len(validation.IsDNS1123Subdomain(identity)) == 0 {
			require.Empty(t, validation.IsDNS1123Subdomain(got), "M1: a valid identity name gives a valid Secret name")
		}
	})
}

// decodeData builds Secret data from fuzz bytes: each entry is a length
// byte and that many key bytes, then a length byte and that many value bytes.
// It also returns the keys in the order they were decoded.
func decodeData(raw []byte) (map[string][]byte, []string) {
	data := map[string][]byte{}
	var order []string
	next := func() []byte {
		if len(raw) == 0 {
			return nil
		}
		n := min(int(raw[0]), len(raw)-1)
		out := raw[1 : 1+n]
		raw = raw[1+n:]
		return out
	}
	for len(raw) > 0 {
		k, v := string(next()), next()
		if _, dup := data[k]; !dup {
			order = append(order, k)
		}
		data[k] = v
	}
	return data, order
}

// referenceHash is SPEC M4 written independently of SourceHash.
func referenceHash(data map[string][]byte) string {
	var buf bytes.Buffer
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		_ = binary.Write(&buf, binary.BigEndian, uint64(len(k)))
		buf.WriteString(k)
		_ = binary.Write(&buf, binary.BigEndian, uint64(len(data[k])))
		buf.Write(data[k])
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

var lowerHex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func FuzzSourceHash(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 'a', 2, 'b', 'c', 2, 'a', 'b', 1, 'c'})
	f.Add([]byte{4, 'u', 's', 'e', 'r', 5, 'a', 'd', 'm', 'i', 'n', 4, 'p', 'a', 's', 's', 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		data, order := decodeData(raw)
		got := SourceHash(data)
		require.Regexp(t, lowerHex64, got)
		require.Equal(t, got, SourceHash(data), "deterministic")
		require.Equal(t, referenceHash(data), got, "M4 encoding")

		// The same entries inserted in reverse order into a fresh map.
		reversed := make(map[string][]byte, len(data))
		for _, k := range slices.Backward(order) {
			reversed[k] = bytes.Clone(data[k])
		}
		require.Equal(t, got, SourceHash(reversed), "order independent")

		// The mirror built from it carries the same hash, and its data hashes the same.
		m := DesiredMirror("id", "ns", data)
		require.Equal(t, got, m.Annotations[v1alpha1.AnnotationSourceHash])
		require.Equal(t, got, SourceHash(m.Data))
	})
}

func FuzzNamespaceAllowed(f *testing.F) {
	f.Add("a", "a", "env", "prod", "In", uint8(0xff), true)
	f.Add("a", "b", "env", "prod", "Bogus", uint8(0x06), false)
	f.Add("", "", "", "", "", uint8(0), false)
	f.Fuzz(func(t *testing.T, namespace, listed, key, value, op string, flags uint8, found bool) {
		allowed := &v1alpha1.AllowedNamespaces{}
		if flags&1 != 0 {
			allowed.List = []string{listed}
		}
		if flags&2 != 0 {
			allowed.Selector = &metav1.LabelSelector{}
			if flags&4 != 0 {
				allowed.Selector.MatchLabels = map[string]string{key: value}
			}
			if flags&8 != 0 {
				r := metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOperator(op)}
				if flags&16 != 0 {
					r.Values = []string{value}
				}
				allowed.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{r}
			}
		}
		calls := 0
		lookup := func() (labels.Set, bool) {
			calls++
			return labels.Set{key: value}, found
		}

		got := NamespaceAllowed(allowed, namespace, lookup)
		require.LessOrEqual(t, calls, 1, "nsLabels called at most once")
		if slices.Contains(allowed.List, namespace) {
			require.True(t, got, "N: a listed namespace is allowed")
			require.Zero(t, calls)
		}
		if SelectorMatchesEverything(allowed) {
			require.True(t, got, "N: selector {} allows every namespace")
			require.Zero(t, calls, "N: selector {} needs no Namespace read")
		}
		if !found && !slices.Contains(allowed.List, namespace) && !SelectorMatchesEverything(allowed) {
			require.False(t, got, "N: an unknown namespace matches no non-empty selector")
		}
		if allowed.Selector != nil {
			if _, err := metav1.LabelSelectorAsSelector(allowed.Selector); err != nil {
				require.Zero(t, calls, "N6: an invalid selector needs no Namespace read")
				require.Equal(t, slices.Contains(allowed.List, namespace), got, "N6: an invalid selector matches nothing")
			}
		}
		require.False(t, NamespaceAllowed(nil, namespace, lookup), "N: unset allows nothing")
		require.True(t, NamespaceAllowed(&v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}, namespace, nil))
	})
}

// Vocabulary for decoding fuzz bytes into allowedNamespaces: small, so that
// the fuzzer often produces equal or equivalent values, and including an
// invalid key and an invalid operator.
var (
	fuzzNamespaces = []string{"a", "b", "c", "d", "e", "f"}
	fuzzKeys       = []string{"env", "team", "bad key!"}
	fuzzValues     = []string{"prod", "dev", "x", ""}
	fuzzOps        = []metav1.LabelSelectorOperator{
		metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn,
		metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, "Bogus",
	}
	// fuzzLabels are the labels of the fuzz namespaces; "f" does not exist.
	fuzzLabels = map[string]labels.Set{
		"a": {"env": "prod", "team": "x"},
		"b": {"env": "dev"},
		"c": {},
		"d": {"env": "prod"},
		"e": {"team": "dev", "env": ""},
	}
)

// decodeAllowed builds an allowedNamespaces from fuzz bytes: a flags byte
// (non-nil, has list, has selector, non-nil empty maps), a list mask over
// fuzzNamespaces, then three bytes per requirement (kind and key, operator
// or value, values mask).
func decodeAllowed(raw []byte) *v1alpha1.AllowedNamespaces {
	at := func(i int) byte {
		if i < len(raw) {
			return raw[i]
		}
		return 0
	}
	flags := at(0)
	if flags&1 == 0 {
		return nil
	}
	out := &v1alpha1.AllowedNamespaces{}
	if flags&2 != 0 {
		out.List = []string{}
		for i, ns := range fuzzNamespaces {
			if at(1)&(1<<i) != 0 {
				out.List = append(out.List, ns)
			}
		}
	}
	if flags&4 == 0 {
		return out
	}
	out.Selector = &metav1.LabelSelector{}
	if flags&8 != 0 {
		out.Selector.MatchLabels = map[string]string{}
		out.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{}
	}
	for i := 2; i+2 < len(raw) && i < 2+3*4; i += 3 {
		key := fuzzKeys[int(raw[i]>>1)%len(fuzzKeys)]
		if raw[i]&1 == 0 {
			if out.Selector.MatchLabels == nil {
				out.Selector.MatchLabels = map[string]string{}
			}
			out.Selector.MatchLabels[key] = fuzzValues[int(raw[i+1])%len(fuzzValues)]
			continue
		}
		r := metav1.LabelSelectorRequirement{Key: key, Operator: fuzzOps[int(raw[i+1])%len(fuzzOps)]}
		for j, v := range fuzzValues {
			if raw[i+2]&(1<<j) != 0 {
				r.Values = append(r.Values, v)
			}
		}
		if raw[i+2]&0x80 != 0 { // a duplicate value, to exercise set semantics
			r.Values = append(r.Values, r.Values...)
		}
		out.Selector.MatchExpressions = append(out.Selector.MatchExpressions, r)
	}
	return out
}

// allowedIn lists the fuzz namespaces allowed reads.
func allowedIn(allowed *v1alpha1.AllowedNamespaces) []string {
	var out []string
	for _, ns := range fuzzNamespaces {
		set, found := fuzzLabels[ns]
		if NamespaceAllowed(allowed, ns, func() (labels.Set, bool) { return set, found }) {
			out = append(out, ns)
		}
	}
	return out
}

func FuzzWidens(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte{3, 0x03}, []byte{3, 0x01})
	f.Add([]byte{7, 0x01, 0, 0, 0}, []byte{5, 0, 1, 0, 0x04})
	f.Add([]byte{5, 0, 0, 1}, []byte{7, 0x03, 2, 0, 0})
	f.Add([]byte{5, 0, 1, 4, 0x81}, []byte{13, 0, 1, 4, 0x01})
	// matchLabels env=prod -> env In [dev]: the soundness check found it
	// within seconds in a mutation test whose canonical form dropped values.
	f.Add([]byte("70000"), []byte("70122"))
	f.Fuzz(func(t *testing.T, rawOld, rawNew []byte) {
		old, new := decodeAllowed(rawOld), decodeAllowed(rawNew)
		widens := Widens(old, new)
		require.Equal(t, widens, Widens(old, new), "deterministic")
		require.False(t, Widens(old, old), "A3: identical values never widen")
		require.False(t, Widens(old, old.DeepCopy()), "A3: equal values never widen")
		require.False(t, Widens(new, new.DeepCopy()), "A3: equal values never widen")
		if !widens {
			// Soundness: a change called narrowing allows nothing new.
			oldAllowed := allowedIn(old)
			for _, ns := range allowedIn(new) {
				require.Contains(t, oldAllowed, ns, "A3: narrowing %v -> %v newly allows %q", old, new, ns)
			}
		}
	})
}

func FuzzSelectCluster(f *testing.F) {
	f.Add("prod", []byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add("", []byte{1, 1, 1})
	f.Add("a", []byte{0x10, 0x21, 0x32})
	f.Fuzz(func(t *testing.T, value string, raw []byte) {
		names := []string{"a", "b", "prod", value}
		var candidates []*v1alpha1.TerraformCluster
		// One cluster per byte: name, namespace and label value chosen by
		// bits. UIDs are unique, as they are on a server; names may repeat
		// to exercise the tie-break.
		for i, b := range raw {
			if i == 16 {
				break
			}
			ns := "ns"
			if b&0x40 != 0 {
				ns = "other"
			}
			label := ""
			if b&0x80 != 0 {
				label = names[int(b>>4)%len(names)]
			}
			candidates = append(candidates, tfCluster(ns, names[int(b)%len(names)], label, types.UID(fmt.Sprintf("uid-%02d", i))))
		}
		got := SelectCluster(value, "ns", candidates)
		for i := range candidates {
			rotated := append(slices.Clone(candidates[i:]), candidates[:i]...)
			require.Equal(t, got, SelectCluster(value, "ns", rotated), "order independent")
		}
		if value == "" {
			require.Nil(t, got)
			return
		}
		var labelled, named []*v1alpha1.TerraformCluster
		for _, c := range candidates {
			if c.Namespace != "ns" {
				continue
			}
			if c.Labels[v1alpha1.LabelClusterName] == value {
				labelled = append(labelled, c)
			}
			if c.Name == value {
				named = append(named, c)
			}
		}
		switch {
		case len(labelled) > 0:
			require.NotNil(t, got)
			require.Equal(t, value, got.Labels[v1alpha1.LabelClusterName], "1.2: a label match wins")
			for _, c := range labelled {
				require.LessOrEqual(t, got.Name, c.Name, "1.2: lowest name wins")
			}
		case len(named) > 0:
			require.NotNil(t, got)
			require.Equal(t, value, got.Name)
		default:
			require.Nil(t, got)
		}
		if got != nil {
			require.Equal(t, "ns", got.Namespace, "never another namespace")
		}
	})
}

func FuzzMemberIdentity(f *testing.F) {
	f.Add("own", "dflt", "cl", uint8(0xff))
	f.Add("", "", "", uint8(0))
	f.Fuzz(func(t *testing.T, own, dflt, cl string, flags uint8) {
		var ownRef *v1alpha1.IdentityReference
		if flags&1 != 0 {
			ownRef = ref(own)
		}
		var c *v1alpha1.TerraformCluster
		if flags&2 != 0 {
			c = &v1alpha1.TerraformCluster{}
			if flags&4 != 0 {
				c.Spec.IdentityRef = ref(cl)
			}
			if flags&8 != 0 {
				c.Spec.Defaults = &v1alpha1.ClusterDefaults{}
				if flags&16 != 0 {
					c.Spec.Defaults.IdentityRef = ref(dflt)
				}
			}
		}
		name, source := MemberIdentity(ownRef, c)
		name2, source2 := MemberIdentity(ownRef, c)
		require.Equal(t, name, name2, "deterministic")
		require.Equal(t, source, source2, "deterministic")
		require.Equal(t, name == "", source == IdentitySourceNone, "a name exactly when a source")
		switch source {
		case IdentitySourceOwn:
			require.Equal(t, own, name)
		case IdentitySourceClusterDefaults:
			require.Equal(t, dflt, name)
			require.Empty(t, refName(ownRef), "I2: own wins")
		case IdentitySourceCluster:
			require.Equal(t, cl, name)
			require.Empty(t, refName(ownRef), "I2: own wins")
			require.Equal(t, ClusterIdentity(c), name, "I1 and I2 agree")
		case IdentitySourceNone:
			require.Empty(t, refName(ownRef))
			require.Empty(t, ClusterIdentity(c))
		default:
			t.Fatalf("unknown source %q", source)
		}
	})
}
