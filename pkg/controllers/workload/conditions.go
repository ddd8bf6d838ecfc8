package workload

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
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
// after in status, reason or message: events fire once per change, not
// once per pass (SPEC section 10).
func conditionChanged(before, after []metav1.Condition, t v1alpha1.ConditionType) bool {
	b := meta.FindStatusCondition(before, string(t))
	a := meta.FindStatusCondition(after, string(t))
	if b == nil || a == nil {
		return b != a
	}
	return b.Status != a.Status || b.Reason != a.Reason || b.Message != a.Message
}

// isTrue reports whether condition t of w is True.
func isTrue(w *workload, t v1alpha1.ConditionType) bool {
	return meta.IsStatusConditionTrue(w.status.Conditions, string(t))
}

// summarize sets Ready. Once provisioned it follows InfrastructureHealthy
// and deletion, not the run in progress (SPEC K8): a re-apply does not
// flip Cluster API's InfrastructureReady. Before, it is True only when
// DependenciesReady (K2-K5), IdentityAllowed, CredentialsMirrored and
// ApplyJobSucceeded all are, else False with the reason and message of
// the first that is not.
func summarize(w *workload, now time.Time) {
	deleting := w.obj.GetDeletionTimestamp() != nil
	if provisioned(w.status) {
		health := contract.Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonHealthUnknown, Message: "not reported yet"}
		if h := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionInfrastructureHealthy)); h != nil {
			health = contract.Condition{Status: h.Status, Reason: v1alpha1.ConditionReason(h.Reason), Message: h.Message}
		}
		if ready, ok := contract.Ready(true, deleting, health); ok {
			setCondition(w, now, v1alpha1.ConditionReady, ready.Status, ready.Reason, "%s", ready.Message)
			return
		}
	}
	summary := []v1alpha1.ConditionType{v1alpha1.ConditionIdentityAllowed, v1alpha1.ConditionCredentialsMirrored, v1alpha1.ConditionApplyJobSucceeded}
	if !deleting {
		summary = append([]v1alpha1.ConditionType{v1alpha1.ConditionDependenciesReady}, summary...)
	}
	for _, t := range summary {
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

// pendingEvent is an event a pass decided on; emitEvents records it.
type pendingEvent struct {
	obj                      runtime.Object
	eventType, reason, descr string
}

// event queues an event on w for the end of the pass.
func (w *workload) event(eventType, reason, format string, args ...any) {
	w.eventOn(w.robj, eventType, reason, format, args...)
}

// eventOn queues an event on another object (a co-owner of a mirror).
func (w *workload) eventOn(obj runtime.Object, eventType, reason, format string, args ...any) {
	w.events = append(w.events, pendingEvent{obj: obj, eventType: eventType, reason: reason, descr: fmt.Sprintf(format, args...)})
}

// eventOnceWritten queues an event on obj for after the pass's status
// write has succeeded (w.recorded).
func (w *workload) eventOnceWritten(obj runtime.Object, eventType, reason, format string, args ...any) {
	w.recorded = append(w.recorded, pendingEvent{obj: obj, eventType: eventType, reason: reason, descr: fmt.Sprintf(format, args...)})
}

// emit records events: the pass's (emitEvents), and those of what a
// written status records (w.recorded, once the write succeeded).
func (c *Controller) emit(events []pendingEvent) {
	for _, e := range events {
		c.recorder.Event(e.obj, e.eventType, e.reason, e.descr)
	}
}

func (w *workload) normal(reason, format string, args ...any) {
	w.event(corev1.EventTypeNormal, reason, format, args...)
}

func (w *workload) warn(reason, format string, args ...any) {
	w.event(corev1.EventTypeWarning, reason, format, args...)
}

// emitEvents is the one place a pass's events are recorded (SPEC section
// 10): the warnings of conditions that changed since before (once per
// change, not per pass), then the events of what the pass did (a mirror
// created or removed, an owner reference repaired, infrastructure
// abandoned). It empties w's queue of events.
func (c *Controller) emitEvents(w *workload, before *v1alpha1.WorkloadStatus) {
	after := w.status.Conditions
	if conditionChanged(before.Conditions, after, v1alpha1.ConditionIdentityAllowed) {
		if cond := meta.FindStatusCondition(after, string(v1alpha1.ConditionIdentityAllowed)); cond != nil && cond.Status == metav1.ConditionFalse {
			c.recorder.Event(w.robj, corev1.EventTypeWarning, v1alpha1.EventIdentityNotAllowed, cond.Message)
		}
	}
	if conditionChanged(before.Conditions, after, v1alpha1.ConditionCredentialsMirrored) {
		if cond := meta.FindStatusCondition(after, string(v1alpha1.ConditionCredentialsMirrored)); cond != nil && cond.Reason == string(v1alpha1.ReasonMirrorFailed) {
			c.recorder.Event(w.robj, corev1.EventTypeWarning, v1alpha1.EventMirrorConflict, cond.Message)
		}
	}
	c.emit(w.events)
	w.events = nil
}
