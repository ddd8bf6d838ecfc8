package framework

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// FinishJob sets a Job's status as the Job controller would when its pod
// ends: there is no kubelet here, so pods never run. reason is "" for
// success, else the failure reason (BackoffLimitExceeded, DeadlineExceeded).
func (e *Env) FinishJob(ctx context.Context, namespace, name string, reason string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j, err := e.Kube.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewTime(time.Now())
		if j.Status.StartTime == nil {
			start := metav1.NewTime(now.Add(-time.Second))
			j.Status.StartTime = &start
		}
		j.Status.Active = 0
		j.Status.Ready = nil
		j.Status.Terminating = nil
		cond := func(t batchv1.JobConditionType, r, msg string) batchv1.JobCondition {
			return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: r, Message: msg, LastProbeTime: now, LastTransitionTime: now}
		}
		if reason == "" {
			j.Status.Succeeded = 1
			j.Status.CompletionTime = &now
			j.Status.Conditions = append(j.Status.Conditions,
				cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods"),
				cond(batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods"))
		} else {
			j.Status.Failed = 1
			j.Status.Conditions = append(j.Status.Conditions,
				cond(batchv1.JobFailureTarget, reason, "Job failed: "+reason),
				cond(batchv1.JobFailed, reason, "Job failed: "+reason))
		}
		_, err = e.Kube.BatchV1().Jobs(namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{})
		return err
	})
}
