package workload

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// setCondition sets a condition on w's status; the transition time moves
// only when the status changes.
func setCondition(w *workload, now time.Time, t v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason, format string, args ...any) {
	meta.SetStatusCondition(&w.status.Conditions, metav1.Condition{
		Type:               string(t),
		Status:             status,
		Reason:             string(reason),
		Message:            fmt.Sprintf(format, args...),
		ObservedGeneration: w.obj.GetGeneration(),
		LastTransitionTime: metav1.NewTime(now),
	})
}

// conditionChanged reports whether condition t differs between before and
// w's status in status, reason or message: events fire once per change,
// not once per pass (SPEC section 10).
func conditionChanged(before []metav1.Condition, w *workload, t v1alpha1.ConditionType) bool {
	b := meta.FindStatusCondition(before, string(t))
	a := meta.FindStatusCondition(w.status.Conditions, string(t))
	if b == nil || a == nil {
		return b != a
	}
	return b.Status != a.Status || b.Reason != a.Reason || b.Message != a.Message
}

// isTrue reports whether condition t of w is True.
func isTrue(w *workload, t v1alpha1.ConditionType) bool {
	return meta.IsStatusConditionTrue(w.status.Conditions, string(t))
}

// summarize sets Ready from the other three: True only when all are True,
// else False with the reason and message of the first that is not.
func summarize(w *workload, now time.Time) {
	for _, t := range []v1alpha1.ConditionType{v1alpha1.ConditionIdentityAllowed, v1alpha1.ConditionCredentialsMirrored, v1alpha1.ConditionApplyJobSucceeded} {
		c := meta.FindStatusCondition(w.status.Conditions, string(t))
		if c == nil {
			setCondition(w, now, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNoApplyYet, "%s has not been reported yet", t)
			return
		}
		if c.Status != metav1.ConditionTrue {
			setCondition(w, now, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ConditionReason(c.Reason), "%s: %s", t, c.Message)
			return
		}
	}
	setCondition(w, now, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady, "credentials are mirrored and the latest Job succeeded")
}

// event records an event on w.
func (c *Controller) event(w *workload, eventType, reason, format string, args ...any) {
	c.recorder.Eventf(w.robj, eventType, reason, format, args...)
}

func (c *Controller) warn(w *workload, reason, format string, args ...any) {
	c.event(w, corev1.EventTypeWarning, reason, format, args...)
}

func (c *Controller) normal(w *workload, reason, format string, args ...any) {
	c.event(w, corev1.EventTypeNormal, reason, format, args...)
}
