package jobs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// PodSecurityContext returns override merged over the pod defaults of SPEC
// T6, field by field: runAsNonRoot true, runAsUser [RunAsUser], runAsGroup
// [RunAsGroup], fsGroup [CredentialsGroup], seccompProfile RuntimeDefault.
// A field override sets replaces the default whole (a seccompProfile with
// its localhostProfile, for one); the others keep it. The result shares no
// memory with override.
func PodSecurityContext(override *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{}
	if override != nil {
		sc = override.DeepCopy()
	}
	if sc.RunAsNonRoot == nil {
		sc.RunAsNonRoot = ptr.To(true)
	}
	if sc.RunAsUser == nil {
		sc.RunAsUser = ptr.To(RunAsUser)
	}
	if sc.RunAsGroup == nil {
		sc.RunAsGroup = ptr.To(RunAsGroup)
	}
	if sc.FSGroup == nil {
		// The credential files are 0440 (J2) and owned by root. fsGroup
		// makes the kubelet give them this group and adds the group to
		// every container's supplementary groups, so a module image running
		// as any non-root user can read them, without widening the mode.
		sc.FSGroup = ptr.To(CredentialsGroup)
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	return sc
}

// ContainerSecurityContext returns override merged over the container
// defaults of SPEC T6, field by field: allowPrivilegeEscalation false,
// capabilities.drop [ALL], readOnlyRootFilesystem true. The values the CRD
// refuses (privileged or allowPrivilegeEscalation true, capabilities.add)
// are dropped here too, for an object stored without that validation. The
// result shares no memory with override.
func ContainerSecurityContext(override *corev1.SecurityContext) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{}
	if override != nil {
		sc = override.DeepCopy()
	}
	if ptr.Deref(sc.Privileged, false) {
		sc.Privileged = nil
	}
	if ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		sc.AllowPrivilegeEscalation = ptr.To(false)
	}
	if sc.Capabilities == nil {
		sc.Capabilities = &corev1.Capabilities{}
	}
	sc.Capabilities.Add = nil
	if sc.Capabilities.Drop == nil {
		sc.Capabilities.Drop = []corev1.Capability{"ALL"}
	}
	if sc.ReadOnlyRootFilesystem == nil {
		sc.ReadOnlyRootFilesystem = ptr.To(true)
	}
	return sc
}
