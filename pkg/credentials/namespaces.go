package credentials

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// NamespaceAllowed reports whether allowed, an identity's
// spec.allowedNamespaces, allows namespace (SPEC section 3):
//
//   - nil (unset) allows no namespace;
//   - list allows exactly the namespaces it names (an empty list none);
//   - selector allows the namespaces whose labels match it;
//   - `selector: {}` allows every namespace, even one not created yet,
//     without reading the Namespace;
//   - list and selector together allow the union;
//   - an invalid selector matches nothing (SPEC N6).
//
// nsLabels returns the namespace's labels and whether the namespace is known
// (callers read it from the Namespace informer, SPEC N5). It is called at
// most once, and only when a valid, non-empty selector must be evaluated
// because the list did not match, so callers that need no Namespace read pay
// for none. A namespace it does not find matches no non-empty selector; a nil
// nsLabels is treated the same way.
func NamespaceAllowed(allowed *v1alpha1.AllowedNamespaces, namespace string, nsLabels func() (labels.Set, bool)) bool {
	if allowed == nil {
		return false
	}
	if slices.Contains(allowed.List, namespace) {
		return true
	}
	if allowed.Selector == nil {
		return false
	}
	if SelectorMatchesEverything(allowed) {
		return true
	}
	selector, err := metav1.LabelSelectorAsSelector(allowed.Selector)
	if err != nil || nsLabels == nil {
		return false
	}
	set, found := nsLabels()
	return found && selector.Matches(set)
}

// SelectorMatchesEverything reports whether allowed carries `selector: {}`,
// a selector with neither matchLabels nor matchExpressions, which allows
// every namespace (SPEC section 3). Callers use it to skip the Namespace read
// and to index identities that allow every namespace.
func SelectorMatchesEverything(allowed *v1alpha1.AllowedNamespaces) bool {
	return allowed != nil && allowed.Selector != nil &&
		len(allowed.Selector.MatchLabels) == 0 && len(allowed.Selector.MatchExpressions) == 0
}

// Widens reports whether changing allowedNamespaces from old to new can
// allow a namespace that old did not, so that the update needs a
// SubjectAccessReview (SPEC A3). A change narrows only when the new list is
// a subset of the old one and the selector is unchanged or removed; any other
// change widens. nil means no namespace, as in [NamespaceAllowed].
//
// Selectors are compared by meaning, not by spelling: both are turned into
// their set of requirements, with `matchLabels: {k: v}` and
// `k In [v]` counting as the same requirement and value lists compared as
// sets. Equal sets provably select the same namespaces, so narrowing is
// never claimed wrongly; selectors that are equivalent in a way this does not
// see (for example `k In [v]` and `k In [v]` plus `k Exists`) count as a
// change, which only costs a review. An invalid selector equals only an
// identical invalid selector; any other change to or from one widens.
func Widens(old, new *v1alpha1.AllowedNamespaces) bool {
	var oldList, newList []string
	var oldSel, newSel *metav1.LabelSelector
	if old != nil {
		oldList, oldSel = old.List, old.Selector
	}
	if new != nil {
		newList, newSel = new.List, new.Selector
	}
	for _, ns := range newList {
		if !slices.Contains(oldList, ns) {
			return true
		}
	}
	return newSel != nil && !selectorsEqual(oldSel, newSel)
}

// selectorsEqual reports whether two selectors, either of which may be nil,
// provably select the same labels (see [Widens]).
func selectorsEqual(a, b *metav1.LabelSelector) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ca, errA := canonicalSelector(a)
	cb, errB := canonicalSelector(b)
	if errA != nil || errB != nil {
		// Only an unchanged invalid selector is unchanged; Semantic treats
		// nil and empty slices and maps alike.
		return errA != nil && errB != nil && equality.Semantic.DeepEqual(a, b)
	}
	return slices.Equal(ca, cb)
}

// canonicalSelector returns a selector's requirements as sorted, deduplicated
// strings in which equivalent spellings coincide: Equals becomes In and
// NotEquals becomes NotIn (a one-value set is the same test), and values are
// sorted and deduplicated (they are sets). `{}` gives no requirements.
func canonicalSelector(ls *metav1.LabelSelector) ([]string, error) {
	selector, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, err
	}
	reqs, _ := selector.Requirements()
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		op := r.Operator()
		switch op {
		case selection.Equals, selection.DoubleEquals:
			op = selection.In
		case selection.NotEquals:
			op = selection.NotIn
		}
		values := slices.Compact(slices.Sorted(slices.Values(r.ValuesUnsorted())))
		// A NUL cannot appear in a label key or value, so the join is
		// unambiguous.
		out = append(out, strings.Join(append([]string{r.Key(), string(op)}, values...), "\x00"))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
