package credentials

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// matchLabels returns a selector with the given matchLabels.
func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// expr returns a selector with one match expression.
func expr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func TestNamespaceAllowed(t *testing.T) {
	prod := labels.Set{"env": "prod"}
	for _, tc := range []struct {
		name      string
		allowed   *v1alpha1.AllowedNamespaces
		namespace string
		labels    labels.Set
		notFound  bool
		want      bool
		wantCalls int
	}{
		{name: "N/unset allows no namespace", allowed: nil, namespace: "a", labels: prod},

		{name: "N/list names the namespace", allowed: &v1alpha1.AllowedNamespaces{List: []string{"a", "b"}}, namespace: "b", want: true},
		{name: "N/list does not name the namespace", allowed: &v1alpha1.AllowedNamespaces{List: []string{"a", "b"}}, namespace: "c", labels: prod},
		{name: "N/list is exact, not a prefix", allowed: &v1alpha1.AllowedNamespaces{List: []string{"team"}}, namespace: "team-a"},
		{name: "N/empty list matches none", allowed: &v1alpha1.AllowedNamespaces{List: []string{}}, namespace: "a", labels: prod},
		{name: "N/nil list and nil selector match none", allowed: &v1alpha1.AllowedNamespaces{}, namespace: "a", labels: prod},

		{name: "N/selector matches labels", allowed: &v1alpha1.AllowedNamespaces{Selector: matchLabels("env", "prod")}, namespace: "a", labels: prod, want: true, wantCalls: 1},
		{name: "N/selector does not match labels", allowed: &v1alpha1.AllowedNamespaces{Selector: matchLabels("env", "prod")}, namespace: "a", labels: labels.Set{"env": "dev"}, wantCalls: 1},
		{name: "N/selector matchExpressions In", allowed: &v1alpha1.AllowedNamespaces{Selector: expr("env", metav1.LabelSelectorOpIn, "dev", "prod")}, namespace: "a", labels: prod, want: true, wantCalls: 1},
		{name: "N/selector NotIn matches a namespace without the label", allowed: &v1alpha1.AllowedNamespaces{Selector: expr("env", metav1.LabelSelectorOpNotIn, "prod")}, namespace: "a", labels: labels.Set{}, want: true, wantCalls: 1},
		{name: "N/selector DoesNotExist", allowed: &v1alpha1.AllowedNamespaces{Selector: expr("locked", metav1.LabelSelectorOpDoesNotExist)}, namespace: "a", labels: prod, want: true, wantCalls: 1},

		{name: "N/selector {} matches every namespace without a lookup", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}, namespace: "a", labels: labels.Set{}, want: true},
		{name: "N/selector {} matches a namespace not created yet", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}, namespace: "later", notFound: true, want: true},
		{name: "N/selector with empty matchLabels map is {}", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}}}, namespace: "a", notFound: true, want: true},
		{name: "N/selector {} with an empty list still matches every namespace", allowed: &v1alpha1.AllowedNamespaces{List: []string{}, Selector: &metav1.LabelSelector{}}, namespace: "a", notFound: true, want: true},

		{name: "N/list and selector: list matches without a lookup", allowed: &v1alpha1.AllowedNamespaces{List: []string{"a"}, Selector: matchLabels("env", "prod")}, namespace: "a", labels: labels.Set{}, want: true},
		{name: "N/list and selector: selector matches", allowed: &v1alpha1.AllowedNamespaces{List: []string{"a"}, Selector: matchLabels("env", "prod")}, namespace: "b", labels: prod, want: true, wantCalls: 1},
		{name: "N/list and selector: neither matches", allowed: &v1alpha1.AllowedNamespaces{List: []string{"a"}, Selector: matchLabels("env", "prod")}, namespace: "b", labels: labels.Set{}, wantCalls: 1},

		{name: "N6/invalid operator matches nothing", allowed: &v1alpha1.AllowedNamespaces{Selector: expr("env", "Bogus", "prod")}, namespace: "a", labels: prod},
		{name: "N6/In without values matches nothing", allowed: &v1alpha1.AllowedNamespaces{Selector: expr("env", metav1.LabelSelectorOpIn)}, namespace: "a", labels: prod},
		{name: "N6/NotIn without values matches nothing", allowed: &v1alpha1.AllowedNamespaces{Selector: expr("env", metav1.LabelSelectorOpNotIn)}, namespace: "a", labels: prod},
		{name: "N6/Exists with values matches nothing", allowed: &v1alpha1.AllowedNamespaces{Selector: expr("env", metav1.LabelSelectorOpExists, "prod")}, namespace: "a", labels: prod},
		{name: "N6/invalid label key matches nothing", allowed: &v1alpha1.AllowedNamespaces{Selector: matchLabels("bad key!", "prod")}, namespace: "a", labels: labels.Set{"bad key!": "prod"}},
		{name: "N6/invalid label value matches nothing", allowed: &v1alpha1.AllowedNamespaces{Selector: matchLabels("env", "not a value")}, namespace: "a", labels: labels.Set{"env": "not a value"}},
		{name: "N6/invalid selector leaves the list working", allowed: &v1alpha1.AllowedNamespaces{List: []string{"a"}, Selector: expr("env", "Bogus")}, namespace: "a", want: true},

		{name: "N/namespace unknown to the lookup matches no selector", allowed: &v1alpha1.AllowedNamespaces{Selector: matchLabels("env", "prod")}, namespace: "gone", notFound: true, wantCalls: 1},
		{name: "N/namespace unknown to the lookup: not even NotIn", allowed: &v1alpha1.AllowedNamespaces{Selector: expr("env", metav1.LabelSelectorOpNotIn, "prod")}, namespace: "gone", notFound: true, wantCalls: 1},
		{name: "N/namespace unknown to the lookup but listed", allowed: &v1alpha1.AllowedNamespaces{List: []string{"gone"}, Selector: matchLabels("env", "prod")}, namespace: "gone", notFound: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			lookup := func() (labels.Set, bool) {
				calls++
				return tc.labels, !tc.notFound
			}
			require.Equal(t, tc.want, NamespaceAllowed(tc.allowed, tc.namespace, lookup))
			require.Equal(t, tc.wantCalls, calls, "nsLabels calls")
		})
	}

	t.Run("N/nil lookup matches no non-empty selector and does not panic", func(t *testing.T) {
		require.False(t, NamespaceAllowed(&v1alpha1.AllowedNamespaces{Selector: matchLabels("env", "prod")}, "a", nil))
		require.True(t, NamespaceAllowed(&v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}, "a", nil))
		require.True(t, NamespaceAllowed(&v1alpha1.AllowedNamespaces{List: []string{"a"}}, "a", nil))
	})
}

func TestSelectorMatchesEverything(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed *v1alpha1.AllowedNamespaces
		want    bool
	}{
		{"N/unset", nil, false},
		{"N/no selector", &v1alpha1.AllowedNamespaces{List: []string{"a"}}, false},
		{"N/selector {}", &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}, true},
		{"N/selector {} beside a list", &v1alpha1.AllowedNamespaces{List: []string{"a"}, Selector: &metav1.LabelSelector{}}, true},
		{"N/empty maps and slices", &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}}}, true},
		{"N/matchLabels", &v1alpha1.AllowedNamespaces{Selector: matchLabels("a", "b")}, false},
		{"N/matchExpressions", &v1alpha1.AllowedNamespaces{Selector: expr("a", metav1.LabelSelectorOpExists)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, SelectorMatchesEverything(tc.allowed))
		})
	}
}

func TestWidens(t *testing.T) {
	list := func(ns ...string) *v1alpha1.AllowedNamespaces { return &v1alpha1.AllowedNamespaces{List: ns} }
	sel := func(s *metav1.LabelSelector, ns ...string) *v1alpha1.AllowedNamespaces {
		return &v1alpha1.AllowedNamespaces{List: ns, Selector: s}
	}
	everything := &metav1.LabelSelector{}
	for _, tc := range []struct {
		name     string
		old, new *v1alpha1.AllowedNamespaces
		want     bool
	}{
		{"A3/nil to nil", nil, nil, false},
		{"A3/nil to list", nil, list("a"), true},
		{"A3/nil to empty list", nil, list(), false},
		{"A3/nil to {}", nil, &v1alpha1.AllowedNamespaces{}, false},
		{"A3/nil to selector", nil, sel(matchLabels("env", "prod")), true},
		{"A3/nil to selector {}", nil, sel(everything), true},
		{"A3/nil to invalid selector", nil, sel(expr("env", "Bogus")), true},
		{"A3/list to nil", list("a"), nil, false},
		{"A3/selector to nil", sel(matchLabels("env", "prod")), nil, false},

		{"A3/same list", list("a", "b"), list("a", "b"), false},
		{"A3/list reordered", list("a", "b"), list("b", "a"), false},
		{"A3/list grown", list("a"), list("a", "b"), true},
		{"A3/list replaced", list("a"), list("b"), true},
		{"A3/list shrunk", list("a", "b"), list("a"), false},
		{"A3/list emptied", list("a", "b"), list(), false},
		{"A3/empty list to list", list(), list("a"), true},

		{"A3/selector added", list("a"), sel(matchLabels("env", "prod"), "a"), true},
		{"A3/selector changed", sel(matchLabels("env", "prod")), sel(matchLabels("env", "dev")), true},
		{"A3/selector made stricter still counts as a change", sel(matchLabels("env", "prod")), sel(matchLabels("env", "prod", "tier", "1")), true},
		{"A3/selector unchanged", sel(matchLabels("env", "prod"), "a"), sel(matchLabels("env", "prod"), "a"), false},
		{"A3/selector unchanged, list shrunk", sel(matchLabels("env", "prod"), "a", "b"), sel(matchLabels("env", "prod"), "b"), false},
		{"A3/selector unchanged, list grown", sel(matchLabels("env", "prod"), "a"), sel(matchLabels("env", "prod"), "a", "b"), true},
		{"A3/selector removed, list kept", sel(matchLabels("env", "prod"), "a"), list("a"), false},
		{"A3/selector removed, list grown", sel(matchLabels("env", "prod"), "a"), list("a", "b"), true},
		{"A3/selector {} replacing a list", list("a"), sel(everything), true},
		{"A3/selector {} unchanged", sel(everything), sel(everything), false},
		{"A3/selector {} to empty maps is unchanged", sel(everything), sel(&metav1.LabelSelector{MatchLabels: map[string]string{}}), false},
		{"A3/selector {} to a list", sel(everything), list("a"), true},
		{"A3/selector {} to a narrower selector still counts as a change", sel(everything), sel(matchLabels("env", "prod")), true},

		// Semantic equality: these spell the same requirement.
		{"A3/matchLabels to In with the same one value is unchanged", sel(matchLabels("env", "prod")), sel(expr("env", metav1.LabelSelectorOpIn, "prod")), false},
		{"A3/In to matchLabels is unchanged", sel(expr("env", metav1.LabelSelectorOpIn, "prod")), sel(matchLabels("env", "prod")), false},
		{"A3/In values reordered is unchanged", sel(expr("env", metav1.LabelSelectorOpIn, "a", "b")), sel(expr("env", metav1.LabelSelectorOpIn, "b", "a")), false},
		{"A3/In values duplicated is unchanged", sel(expr("env", metav1.LabelSelectorOpIn, "a")), sel(expr("env", metav1.LabelSelectorOpIn, "a", "a")), false},
		{"A3/same requirement twice is unchanged", sel(matchLabels("env", "prod")), sel(&metav1.LabelSelector{
			MatchLabels:      map[string]string{"env": "prod"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}}},
		}), false},
		{"A3/expressions reordered is unchanged", sel(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "a", Operator: metav1.LabelSelectorOpExists}, {Key: "b", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}), sel(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "b", Operator: metav1.LabelSelectorOpDoesNotExist}, {Key: "a", Operator: metav1.LabelSelectorOpExists},
		}}), false},
		{"A3/In value added widens", sel(expr("env", metav1.LabelSelectorOpIn, "a")), sel(expr("env", metav1.LabelSelectorOpIn, "a", "b")), true},
		{"A3/In to NotIn widens", sel(expr("env", metav1.LabelSelectorOpIn, "a")), sel(expr("env", metav1.LabelSelectorOpNotIn, "a")), true},

		// Invalid selectors: only an identical invalid selector is unchanged.
		{"A3/invalid selector unchanged", sel(expr("env", "Bogus", "x")), sel(expr("env", "Bogus", "x")), false},
		{"A3/invalid selector unchanged, nil and empty values alike", sel(expr("env", metav1.LabelSelectorOpIn)), sel(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{}}}}), false},
		{"A3/invalid selector changed", sel(expr("env", "Bogus", "x")), sel(expr("env", "Bogus", "y")), true},
		{"A3/invalid old to valid new", sel(expr("env", "Bogus")), sel(matchLabels("env", "prod")), true},
		{"A3/valid old to invalid new", sel(matchLabels("env", "prod")), sel(expr("env", "Bogus")), true},
		{"A3/invalid selector removed, list kept", sel(expr("env", "Bogus"), "a"), list("a"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Widens(tc.old, tc.new))
		})
	}

	t.Run("A3/identical values never widen", func(t *testing.T) {
		for _, x := range []*v1alpha1.AllowedNamespaces{
			nil, {}, list(), list("a"), sel(everything), sel(matchLabels("a", "b"), "c"), sel(expr("k", "Bogus")),
		} {
			require.False(t, Widens(x, x))
			require.False(t, Widens(x, x.DeepCopy()))
		}
	})
}
