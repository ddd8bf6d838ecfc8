package jobs

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/tfstate"
)

// The pod of a Job: its spec, the Terraform container's command and env.

// CredentialsGroup is the pod's fsGroup: the group that owns the credential
// files, added to every container's supplementary groups (see
// [PodSecurityContext]), unless spec.jobs.podSecurityContext sets another.
const CredentialsGroup int64 = 65532

// podSpec is the pod template's spec (SPEC J2, J3, J5, T6).
func podSpec(p Params) corev1.PodSpec {
	emptyDir := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	spec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		// T1: the state backend's permissions come with this ServiceAccount;
		// its token is the pod's default projected volume, and no other.
		ServiceAccountName:            p.ServiceAccountName,
		TerminationGracePeriodSeconds: ptr.To(TerminationGracePeriodSeconds),
		SecurityContext:               PodSecurityContext(p.PodSecurityContext),
		Volumes: []corev1.Volume{
			{
				Name: CredentialsVolumeName,
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: p.MirrorName,
					// No Items: one file per key (J2). Optional unset: a
					// missing mirror keeps the pod from starting rather than
					// running Terraform without credentials.
					DefaultMode: ptr.To(CredentialsFileMode),
				}},
			},
			emptyDir(RunnerVolumeName),
			// The root filesystem is read-only (T6): these are all the
			// Terraform container can write.
			emptyDir(WorkVolumeName),
			emptyDir(TmpVolumeName),
			emptyDir(HomeVolumeName),
		},
		InitContainers: []corev1.Container{{
			Name:  InitContainerName,
			Image: p.RunnerImage,
			// The runner image's entrypoint is the captf binary.
			Args: []string{"runner", "install", RunnerPath},
			VolumeMounts: []corev1.VolumeMount{
				{Name: RunnerVolumeName, MountPath: RunnerDir},
			},
			// The defaults only: the overrides are for the module's container.
			SecurityContext: ContainerSecurityContext(nil),
		}},
		Containers: []corev1.Container{{
			Name:  ContainerName,
			Image: p.ModuleImage,
			// The runner copies the image's working directory (the module)
			// to WorkDir and runs Terraform there (J6, T2).
			Command: command(p),
			EnvFrom: []corev1.EnvFromSource{{
				SecretRef: &corev1.SecretEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: p.MirrorName},
				},
			}},
			Env: env(p),
			// SPEC O1: the runner's result document, read by the manager
			// from the pod's status. File, never the log's tail: a log
			// may hold what the document redacts.
			TerminationMessagePath:   ResultPath,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			VolumeMounts: []corev1.VolumeMount{
				{Name: CredentialsVolumeName, MountPath: CredentialsMountPath, ReadOnly: true},
				{Name: RunnerVolumeName, MountPath: RunnerDir, ReadOnly: true},
				{Name: WorkVolumeName, MountPath: WorkDir},
				{Name: TmpVolumeName, MountPath: TmpDir},
				{Name: HomeVolumeName, MountPath: HomeDir},
			},
			SecurityContext: ContainerSecurityContext(p.SecurityContext),
		}},
	}
	if p.Inputs {
		mountInputs(&spec, p)
	}
	if p.Restore != nil {
		mountRestore(&spec, p.Restore)
	}
	return spec
}

// mountRestore mounts the Secrets of the backup a restore Job pushes
// (SPEC O5) as one projected volume, part i as the file i: the Job spec
// names them, their content is only in the pod's volume (X1). None is
// optional: a backup pruned before the pod starts keeps it from
// starting rather than pushing part of a state.
func mountRestore(spec *corev1.PodSpec, r *Restore) {
	sources := make([]corev1.VolumeProjection, 0, len(r.Secrets))
	for i, name := range r.Secrets {
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
			Items:                []corev1.KeyToPath{{Key: tfstate.DataKey, Path: strconv.Itoa(i)}},
		}})
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: RestoreVolumeName,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: sources, DefaultMode: ptr.To(CredentialsFileMode),
		}},
	})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: RestoreVolumeName, MountPath: RestoreDir, ReadOnly: true})
}

// mountInputs mounts the run Secret of p's Job, where the inputs,
// bootstrap data among them, reach the pod: only there, never in the Job
// spec (SPEC K5).
func mountInputs(spec *corev1.PodSpec, p Params) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: InputsVolumeName,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  RunSecretName(AttemptOrReapplyName(p)),
			DefaultMode: ptr.To(CredentialsFileMode),
		}},
	})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: InputsVolumeName, MountPath: InputsDir, ReadOnly: true})
}

// command is the Terraform container's command (SPEC J5, T2, T8):
// `captf runner <action>` with the working copy, HOME and lock wait.
func command(p Params) []string {
	lock := LockTimeoutSeconds(p.LockTimeoutSeconds, p.ActiveDeadlineSeconds)
	args := []string{
		RunnerPath, "runner", string(p.Action),
		"--workdir=" + WorkDir,
		"--home=" + HomeDir,
		"--lock-timeout=" + strconv.FormatInt(lock, 10) + "s",
		// T2: the state lives in the object's namespace, in the backend's
		// Secret for this object; apply and destroy share it.
		"--state-namespace=" + p.Namespace,
		"--state-suffix=" + StateSuffix(p.OwnerKind, p.OwnerName),
		// O1: the result document, naming the image.
		"--result=" + ResultPath,
		"--image=" + p.ModuleImage,
	}
	if p.Inputs {
		args = append(args, "--inputs="+InputsDir+"/"+InputsKey)
	}
	if p.Restore != nil {
		args = append(args, "--restore-chunks="+RestoreDir)
	}
	switch {
	case p.Action != "apply":
	case p.ExpectPlan != "":
		// O8: apply exactly the approved plan, or nothing.
		args = append(args, "--expect-plan="+p.ExpectPlan)
	case p.GuardDeletes:
		// O8: a plan that deletes or replaces waits for approval.
		args = append(args, "--guard-deletes")
	}
	return args
}

// env is the Terraform container's env (SPEC J3, T3): the Job's three
// variables first, then CAPTF_VARIABLES when the object sets variables, then
// a deep copy of the object's env in order. env takes precedence over
// envFrom, so no mirror key can override the Job's entries.
//
// An object entry with one of the three names, or starting with CAPTF_, is
// left out. Admission rejects them (A9, T3), so this only matters for an
// object stored without that validation; were it kept, the kubelet would let
// the later entry win and the object could, for example, turn TF_INPUT back
// on or replace the variables.
func env(p Params) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, 4+len(p.Env))
	out = append(out,
		corev1.EnvVar{Name: EnvTFInAutomation, Value: "1"},
		corev1.EnvVar{Name: EnvTFInput, Value: "0"},
		corev1.EnvVar{Name: EnvKubeNamespace, Value: p.Namespace},
	)
	if v, ok := variables(p.Variables); ok {
		out = append(out, corev1.EnvVar{Name: EnvVariables, Value: v})
	}
	for i := range p.Env {
		switch name := p.Env[i].Name; {
		case name == EnvTFInAutomation, name == EnvTFInput, name == EnvKubeNamespace,
			strings.HasPrefix(name, EnvReservedPrefix):
			continue
		}
		out = append(out, *p.Env[i].DeepCopy())
	}
	return out
}

// variables returns raw as compact JSON, and false when raw is empty or
// null (no variables). JSON that does not compact (the API server stores
// none) is passed on as it is, for the runner to refuse loudly.
func variables(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw), true
	}
	return b.String(), true
}
