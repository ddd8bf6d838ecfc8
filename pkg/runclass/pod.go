package runclass

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/captf/captf/pkg/runresult"
)

// Bounds of what is kept of a pod's status.
const (
	maxReason  = 64
	maxImage   = runresult.MaxImage
	maxMessage = 256
	maxName    = 63
)

// pullReasons are the kubelet's waiting reasons of a container whose
// image cannot be pulled (or is not there and may not be).
var pullReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "ImageInspectError"}

// IsPullReason reports whether reason is one of the kubelet's image pull
// failures.
func IsPullReason(reason string) bool { return slices.Contains(pullReasons, reason) }

// Pod is what the manager knows of a Job's pod: bounded facts, no spec.
type Pod struct {
	// Unread: the pods could not be read (an error the caller did not
	// retry, such as RBAC): nothing below is known.
	Unread bool
	// Claims is how many pods claim the Job (its controller reference).
	// Only when it is 1 is the pod read and the rest set.
	Claims int
	// Deleted: the pod has a deletion timestamp.
	Deleted bool
	// Disruption is the reason of the pod's DisruptionTarget=True
	// condition (EvictionByEvictionAPI, PreemptionByScheduler,
	// DeletionByTaintManager, DeletionByPodGC, TerminationByKubelet), ""
	// when it has none.
	Disruption string
	// Phase is the pod's phase.
	Phase corev1.PodPhase
	// Terminated is how the Terraform container ended; nil while it has
	// not (or never ran).
	Terminated *Terminated
	// InitTerminated is how the init container ended, when it failed.
	InitTerminated *Terminated
	// Message is the Terraform container's termination message: the
	// runner's result document (at most 4096 bytes).
	Message []byte
	// ImageID is the Terraform container's imageID as the kubelet
	// reports it (SPEC O6: [DigestOf]), bounded.
	ImageID string
	// PullFailure is the first container (init first) that waits for an
	// image it cannot pull, nil when none.
	PullFailure *PullFailure
}

// Terminated is how a container ended.
type Terminated struct {
	ExitCode int32
	// Reason is the kubelet's: Completed, Error, OOMKilled,
	// ContainerStatusUnknown...
	Reason string
}

// PullFailure is a container waiting for an image it cannot pull.
type PullFailure struct {
	// Container is the container's name: the init container runs the
	// manager's runner image, the other the module image.
	Container string
	// Image is the image reference, as the kubelet reports it.
	Image string
	// Reason is ErrImagePull, ImagePullBackOff, InvalidImageName...
	Reason string
	// Message is the kubelet's message, shortened.
	Message string
}

// FromPod returns the facts of p, the pod the Job controls, for its
// container named container (the Terraform container). Every string is
// cleaned and bounded.
func FromPod(p *corev1.Pod, container string) Pod {
	out := Pod{Claims: 1, Deleted: p.DeletionTimestamp != nil, Phase: p.Status.Phase}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			out.Disruption = bounded(c.Reason, maxReason)
			if out.Disruption == "" {
				out.Disruption = "DisruptionTarget"
			}
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 && out.InitTerminated == nil {
			out.InitTerminated = &Terminated{ExitCode: t.ExitCode, Reason: bounded(t.Reason, maxReason)}
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name != container {
			continue
		}
		out.ImageID = bounded(s.ImageID, maxImage+80)
		if t := s.State.Terminated; t != nil {
			out.Terminated = &Terminated{ExitCode: t.ExitCode, Reason: bounded(t.Reason, maxReason)}
			if len(t.Message) <= runresult.MaxBytes {
				out.Message = []byte(t.Message)
			} else {
				// More than the kubelet keeps: not a document it wrote.
				out.Message = []byte(t.Message[:runresult.MaxBytes+1])
			}
		}
	}
	out.PullFailure = PullFailureOf(p)
	return out
}

// PullFailureOf returns the first container of p, init containers first,
// waiting for an image it cannot pull; nil when none is.
func PullFailureOf(p *corev1.Pod) *PullFailure {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range list {
			if w := s.State.Waiting; w != nil && IsPullReason(w.Reason) {
				return &PullFailure{
					Container: bounded(s.Name, maxName),
					Image:     bounded(s.Image, maxImage),
					Reason:    w.Reason,
					Message:   bounded(w.Message, maxMessage),
				}
			}
		}
	}
	return nil
}

// bounded returns s on one line, cleaned, at most n bytes.
func bounded(s string, n int) string {
	return runresult.Shorten(oneLine(s), n)
}

func oneLine(s string) string {
	b := []rune(runresult.Clean(s))
	for i, r := range b {
		if r == '\n' || r == '\t' {
			b[i] = ' '
		}
	}
	return string(b)
}
