package workload

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/runclass"
)

// createJob creates the Job for action at w's generation. An existing Job of
// that name (a previous pass's create not yet in the cache) counts as
// created. It returns nil without error when the namespace is terminating
// or no ServiceAccount may run the Job (T1: RunnerNotFound).
func (c *Controller) createJob(ctx context.Context, w *workload, action v1alpha1.JobAction, creds credentialResult, plan runPlan) (*batchv1.Job, error) {
	runner := plan.runner
	if runner == "" {
		var err error
		if runner, err = c.ensureRunner(ctx, w); err != nil || runner == "" {
			return nil, err
		}
	}
	// K5, K6: the inputs of the run; an apply saves them first, so a
	// destroy, a restart or a provisioned machine runs with them again.
	in, err := c.runInputs(ctx, w, action)
	if err != nil {
		return nil, err
	}
	if action == v1alpha1.JobActionApply {
		if err := c.saveInputs(ctx, w, in); err != nil {
			return nil, err
		}
	}
	job := jobs.Build(c.jobParams(w, action, creds, plan, runner, in.Hash()))
	created, err := c.kube.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: fieldManager})
	if err == nil {
		err = c.startRun(ctx, created, in)
		if err != nil {
			// Resumed by a later pass (resumeRun); the Job exists.
			err = fmt.Errorf("starting %s Job %s: %w", action, created.Name, err)
		}
	}
	switch {
	case err == nil:
		c.echoes.wrote(cache.ObjectName{Namespace: created.Namespace, Name: created.Name}, created.ResourceVersion)
		if plan.trigger != "" {
			// T7: once per retry Job, on its creation (AlreadyExists below
			// is a Job an earlier pass created and counted).
			metrics.JobRetries.WithLabelValues(actionLabel(action), plan.trigger).Inc()
		}
		klog.FromContext(ctx).Info("Created Job", "job", klog.KObj(created), "action", action, "generation", w.obj.GetGeneration(), "attempt", plan.attempt, "reapply", plan.reapply, "retryTrigger", plan.trigger)
	case apierrors.IsAlreadyExists(err):
		// An earlier pass created it; finish its start if that pass could
		// not (the Job cache did not show it yet).
		created = job
		if existing, gerr := c.uncached.Kube.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{}); gerr == nil && suspendedRun(existing) {
			if err := c.startRun(ctx, existing, in); err != nil {
				return nil, err
			}
		}
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		if action == v1alpha1.JobActionDestroy {
			c.destroyImpossible(w, c.clock.Now())
		} else {
			setCondition(w, c.clock.Now(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed,
				"namespace %s is terminating: no apply Job can be created in it", w.obj.GetNamespace())
		}
		return nil, nil
	default:
		return nil, fmt.Errorf("creating %s Job %s: %w", action, job.Name, err)
	}
	w.status.LastJob = &v1alpha1.JobReference{Name: job.Name, Action: action, Generation: w.obj.GetGeneration()}
	if plan.retry != "" {
		// T7: this value is acted on; the Job records it too.
		w.status.ObservedRetry = plan.retry
	}
	return created, nil
}

// jobParams are the Params of w's Job for action, run as the
// ServiceAccount runner with the contract inputs of hash inputsHash.
func (c *Controller) jobParams(w *workload, action v1alpha1.JobAction, creds credentialResult, plan runPlan, runner, inputsHash string) jobs.Params {
	return jobs.Params{
		ServiceAccountName:    runner,
		OwnerAPIVersion:       v1alpha1.SchemeGroupVersion.String(),
		OwnerKind:             w.kind.name,
		OwnerName:             w.obj.GetName(),
		OwnerUID:              w.obj.GetUID(),
		Namespace:             w.obj.GetNamespace(),
		Generation:            w.obj.GetGeneration(),
		Action:                action,
		ModuleImage:           runclass.RunImage(w.kind.name, w.source.Image, w.status.Source), // O6
		RunnerImage:           c.opts.RunnerImage,
		MirrorName:            creds.mirror,
		Env:                   w.jobs.Env,
		ActiveDeadlineSeconds: ptr.Deref(w.jobs.ActiveDeadlineSeconds, 0),
		SourceHash:            creds.hash,
		Identity:              creds.identity,
		Reapply:               plan.reapply,
		Attempt:               plan.attempt,
		Interruptions:         plan.interruptions,
		Retry:                 plan.retry,
		DriftRemediation:      plan.remediation,
		Variables:             v1alpha1.VariablesOf(w.robj),
		LockTimeoutSeconds:    w.jobs.LockTimeoutSeconds,
		PodSecurityContext:    w.jobs.PodSecurityContext,
		SecurityContext:       w.jobs.SecurityContext,
		Inputs:                true,
		InputsHash:            inputsHash,
		Cluster:               slotClusterName(w),
		Restore:               plan.restore, // O5
		Plan:                  plan.planName,
		ExpectPlan:            plan.planHash,
		GuardDeletes:          plan.guardDeletes,
	}
}
