package runclass

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/runresult"
)

func podOf() *corev1.Pod {
	now := metav1.Now()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "c-apply-1-x7k2q", Namespace: "team-a", UID: "pod-uid", ResourceVersion: "42",
			Labels:            map[string]string{"big": strings.Repeat("l", 60)},
			Annotations:       map[string]string{"big": strings.Repeat("a", 100000)},
			DeletionTimestamp: &now,
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Other", Name: "o", UID: "o"},
				{APIVersion: "batch/v1", Kind: "Job", Name: "c-apply-1", UID: "job-uid", Controller: ptr.To(true)},
			},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "terraform", Env: []corev1.EnvVar{{Name: "CAPTF_VARIABLES", Value: strings.Repeat("v", 65536)}}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodFailed,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse},
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI\nsecond line"},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-runner", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 9, Message: "not ours"}}},
				{Name: "terraform", Image: "registry.example/m:1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: `{"version":1}`}}},
			},
		},
	}
}

func TestFromPod(t *testing.T) {
	got := FromPod(podOf(), "terraform")
	require.Equal(t, Pod{
		Claims: 1, Deleted: true, Disruption: "EvictionByEvictionAPI second line", Phase: corev1.PodFailed,
		Terminated: &Terminated{ExitCode: 1, Reason: "Error"}, Message: []byte(`{"version":1}`),
	}, got)

	p := podOf()
	p.Status.ContainerStatuses[1].State.Terminated.Message = strings.Repeat("m", 10000)
	require.Len(t, FromPod(p, "terraform").Message, runresult.MaxBytes+1, "a message over the kubelet's bound is kept only so far as to be refused")

	p = podOf()
	p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}
	p.Status.InitContainerStatuses[0].Image = "captf:dev"
	p.Status.ContainerStatuses[1].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	require.Equal(t, &PullFailure{Container: "install-runner", Image: "captf:dev", Reason: "ImagePullBackOff", Message: "Back-off pulling image"}, FromPod(p, "terraform").PullFailure)
}

func TestPullFailureOfO2(t *testing.T) {
	for reason, want := range map[string]bool{
		"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true, "ImageInspectError": true,
		"ContainerCreating": false, "PodInitializing": false, "CrashLoopBackOff": false, "CreateContainerConfigError": false,
	} {
		p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "terraform", Image: "m:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}}}
		require.Equal(t, want, PullFailureOf(p) != nil, reason)
	}
}
