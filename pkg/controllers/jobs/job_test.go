package jobs

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/runner"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

const (
	testMirror      = "captf-creds-aws-prod"
	testModuleImage = "registry.example.com/modules/vpc:1.4.0"
	testRunnerImage = "ghcr.io/captf/captf:v0.1.0"
)

// params returns Params for a TerraformCluster "prod.eu-west-1" in "team-a"
// with user env, a custom deadline and a source hash.
func params(action v1alpha1.JobAction) Params {
	return Params{
		OwnerAPIVersion:    "infrastructure.cluster.x-k8s.io/v1alpha1",
		OwnerKind:          "TerraformCluster",
		OwnerName:          "prod.eu-west-1",
		OwnerUID:           "6f1c2a4e-9b3d-4c1e-8a7f-0d2b5e6c7f81",
		Namespace:          "team-a",
		Generation:         7,
		Action:             action,
		ModuleImage:        testModuleImage,
		RunnerImage:        testRunnerImage,
		MirrorName:         testMirror,
		ServiceAccountName: "captf-runner",
		Env: []corev1.EnvVar{
			{Name: "AWS_REGION", Value: "eu-west-1"},
			{Name: "OWNER_TEAM", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "team-info"},
					Key:                  "owner",
				},
			}},
		},
		ActiveDeadlineSeconds: 7200,
		SourceHash:            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Variables:             []byte(`{ "region": "eu-west-1", "zones": [ "a", "b" ] }`),
		LockTimeoutSeconds:    ptr.To[int64](600),
		PodSecurityContext:    &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
	}
}

// testVariables is params' Variables as the Job carries them (T3).
const testVariables = `{"region":"eu-west-1","zones":["a","b"]}`

// TestBuildGolden compares whole Jobs with testdata/<name>.golden.yaml
// (SPEC J1-J5, C5). Run `go test ./pkg/controllers/jobs/ -run TestBuildGolden
// -update` to rewrite the files, then review the diff.
func TestBuildGolden(t *testing.T) {
	minimal := params(v1alpha1.JobActionApply)
	minimal.OwnerKind = "TerraformMachine"
	minimal.OwnerName = "worker-0"
	minimal.Generation = 1
	minimal.Env = nil
	minimal.ActiveDeadlineSeconds = 0
	minimal.SourceHash = ""
	minimal.Variables = nil
	minimal.LockTimeoutSeconds = nil
	minimal.PodSecurityContext = nil

	inputs := minimal
	inputs.Inputs = true
	inputs.InputsHash = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

	for name, p := range map[string]Params{
		"apply":         params(v1alpha1.JobActionApply),
		"destroy":       params(v1alpha1.JobActionDestroy),
		"apply-minimal": minimal,
		"apply-inputs":  inputs,
	} {
		t.Run(name, func(t *testing.T) {
			got, err := yaml.Marshal(Build(p))
			require.NoError(t, err)
			path := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), string(got))

			// Properties the golden files must keep, whatever -update wrote.
			require.NotContains(t, string(got), "blockOwnerDeletion", "J3: absent, not false")
			require.Contains(t, string(got), "defaultMode: 288", "J2: 0440")
			require.Contains(t, string(got), "controller: true", "J1")
			require.Contains(t, string(got), "backoffLimit: 0", "J4")
			require.Equal(t, 2, strings.Count(string(got), "readOnlyRootFilesystem: true"), "T6: both containers")
			require.Equal(t, 2, strings.Count(string(got), "allowPrivilegeEscalation: false"), "T6: both containers")
			require.Contains(t, string(got), "type: RuntimeDefault", "T6")
		})
	}
}

func TestBuildJ1NameLabelsAnnotationsOwner(t *testing.T) {
	p := params(v1alpha1.JobActionApply)
	job := Build(p)

	require.Equal(t, Name(p.OwnerKind, p.OwnerName, p.OwnerUID, p.Action, p.Generation), job.Name)
	require.Equal(t, "team-a", job.Namespace)
	require.Equal(t, map[string]string{v1alpha1.LabelManaged: "true"}, job.Labels)
	require.Equal(t, map[string]string{v1alpha1.LabelManaged: "true"}, job.Spec.Template.Labels)
	require.Equal(t, map[string]string{
		v1alpha1.AnnotationJobAction:     "apply",
		v1alpha1.AnnotationJobGeneration: "7",
		v1alpha1.AnnotationSourceHash:    p.SourceHash,
	}, job.Annotations)

	require.Len(t, job.OwnerReferences, 1)
	ref := job.OwnerReferences[0]
	require.Equal(t, "infrastructure.cluster.x-k8s.io/v1alpha1", ref.APIVersion)
	require.Equal(t, "TerraformCluster", ref.Kind)
	require.Equal(t, "prod.eu-west-1", ref.Name)
	require.Equal(t, p.OwnerUID, ref.UID)

	// The two maps must not be one: a caller adding a label to the Job must
	// not change the pod template.
	job.Labels["x"] = "y"
	require.NotContains(t, job.Spec.Template.Labels, "x")
}

func TestBuildC5SourceHashAnnotationOnlyWhenKnown(t *testing.T) {
	p := params(v1alpha1.JobActionDestroy)
	p.SourceHash = ""
	job := Build(p)
	require.NotContains(t, job.Annotations, v1alpha1.AnnotationSourceHash)
	require.Equal(t, "", SourceHashOf(job))
	require.Equal(t, v1alpha1.JobActionDestroy, ActionOf(job))
}

func TestBuildJ2CredentialsEnvFromAndReadOnlyVolume(t *testing.T) {
	job := Build(params(v1alpha1.JobActionApply))
	pod := job.Spec.Template.Spec

	c := pod.Containers[0]
	require.Equal(t, []corev1.EnvFromSource{{
		SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: testMirror}},
	}}, c.EnvFrom)
	require.Nil(t, c.EnvFrom[0].SecretRef.Optional, "J3: optional unset")
	require.Empty(t, c.EnvFrom[0].Prefix)

	vol := volume(t, pod, CredentialsVolumeName)
	require.NotNil(t, vol.Secret)
	require.Equal(t, testMirror, vol.Secret.SecretName)
	require.NotNil(t, vol.Secret.DefaultMode)
	require.Equal(t, int32(0o440), *vol.Secret.DefaultMode)
	require.Equal(t, int32(288), *vol.Secret.DefaultMode)
	require.Nil(t, vol.Secret.Items, "J2: one file per key")
	require.Nil(t, vol.Secret.Optional, "J3: optional unset")

	m := mount(t, c, CredentialsVolumeName)
	require.Equal(t, "/var/run/captf/credentials", m.MountPath)
	require.Equal(t, CredentialsMountPath, m.MountPath)
	require.True(t, m.ReadOnly)
	require.Empty(t, m.SubPath, "a subPath mount would not follow rotations (R3)")
}

func TestBuildJ3EnvFirstThenUserEnvAndOptionalFieldsAbsent(t *testing.T) {
	p := params(v1alpha1.JobActionApply)
	job := Build(p)
	c := job.Spec.Template.Spec.Containers[0]

	require.Equal(t, []corev1.EnvVar{
		{Name: "TF_IN_AUTOMATION", Value: "1"},
		{Name: "TF_INPUT", Value: "0"},
		{Name: "KUBE_NAMESPACE", Value: "team-a"},
		{Name: "CAPTF_VARIABLES", Value: testVariables},
		p.Env[0],
		p.Env[1],
	}, c.Env)

	ref := job.OwnerReferences[0]
	require.NotNil(t, ref.Controller)
	require.True(t, *ref.Controller)
	require.Nil(t, ref.BlockOwnerDeletion, "J3: absent, not false")

	spec := job.Spec
	require.Nil(t, spec.Completions)
	require.Nil(t, spec.Parallelism)
	require.Nil(t, spec.TTLSecondsAfterFinished)
	require.Nil(t, spec.PodReplacementPolicy)
	// SPEC O2: DisruptionTarget and the runner's stopped exit codes fail
	// the Job with reason PodFailurePolicy.
	require.Equal(t, &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionFailJob,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}, {
		Action:      batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{130, 143}},
	}}}, spec.PodFailurePolicy)
	require.Nil(t, spec.Suspend)
	require.Nil(t, spec.ManualSelector)
	require.Nil(t, spec.Selector)

	pod := spec.Template.Spec
	require.Equal(t, "captf-runner", pod.ServiceAccountName, "T1: the runner ServiceAccount")
	require.Nil(t, pod.AutomountServiceAccountToken, "T1: its token is the default projected volume")
	require.Nil(t, pod.EnableServiceLinks)
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		require.Empty(t, c.Resources, c.Name)
		require.Empty(t, c.ImagePullPolicy, c.Name)
		require.Empty(t, c.WorkingDir, c.Name)
	}
}

// TestBuildJ3UserEnvCannotOverrideJobEnv: admission rejects these names
// (A9); an object stored without that validation still cannot override
// them, because the kubelet lets a later env entry win.
func TestBuildJ3UserEnvCannotOverrideJobEnv(t *testing.T) {
	p := params(v1alpha1.JobActionApply)
	p.Env = []corev1.EnvVar{
		{Name: "TF_INPUT", Value: "1"},
		{Name: "A", Value: "a"},
		{Name: "KUBE_NAMESPACE", Value: "other"},
		{Name: "TF_IN_AUTOMATION", Value: ""},
		{Name: "CAPTF_VARIABLES", Value: `{"region":"us-east-1"}`},
		{Name: "CAPTF_OTHER", Value: "x"},
		{Name: "B", Value: "b"},
	}
	require.Equal(t, []corev1.EnvVar{
		{Name: "TF_IN_AUTOMATION", Value: "1"},
		{Name: "TF_INPUT", Value: "0"},
		{Name: "KUBE_NAMESPACE", Value: "team-a"},
		{Name: "CAPTF_VARIABLES", Value: testVariables},
		{Name: "A", Value: "a"},
		{Name: "B", Value: "b"},
	}, Build(p).Spec.Template.Spec.Containers[0].Env)
}

func TestBuildJ4BackoffLimitAndDeadline(t *testing.T) {
	for _, tc := range []struct {
		in, want int64
	}{
		{in: 7200, want: 7200},
		{in: 1, want: 1},
		{in: 86400, want: 86400},
		{in: 0, want: 3600},
		{in: -5, want: 3600},
	} {
		p := params(v1alpha1.JobActionApply)
		p.ActiveDeadlineSeconds = tc.in
		job := Build(p)
		require.NotNil(t, job.Spec.BackoffLimit)
		require.Equal(t, int32(0), *job.Spec.BackoffLimit)
		require.NotNil(t, job.Spec.ActiveDeadlineSeconds)
		require.Equal(t, tc.want, *job.Spec.ActiveDeadlineSeconds, "in=%d", tc.in)
	}
	require.Equal(t, int64(3600), DefaultActiveDeadlineSeconds)
}

func TestBuildJ5InitContainerAndRunnerCommand(t *testing.T) {
	for _, action := range []v1alpha1.JobAction{v1alpha1.JobActionApply, v1alpha1.JobActionDestroy} {
		t.Run(string(action), func(t *testing.T) {
			pod := Build(params(action)).Spec.Template.Spec

			require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
			require.NotNil(t, pod.TerminationGracePeriodSeconds)
			require.Equal(t, int64(600), *pod.TerminationGracePeriodSeconds)

			require.Len(t, pod.InitContainers, 1)
			ic := pod.InitContainers[0]
			require.Equal(t, "install-runner", ic.Name)
			require.Equal(t, testRunnerImage, ic.Image)
			require.Nil(t, ic.Command, "the runner image's entrypoint is captf")
			require.Equal(t, []string{"runner", "install", "/opt/captf/bin/captf"}, ic.Args)
			require.Equal(t, []corev1.VolumeMount{{Name: RunnerVolumeName, MountPath: "/opt/captf/bin"}}, ic.VolumeMounts)

			require.Len(t, pod.Containers, 1)
			c := pod.Containers[0]
			require.Equal(t, "terraform", c.Name)
			require.Equal(t, testModuleImage, c.Image)
			require.Equal(t, []string{"/opt/captf/bin/captf", "runner", string(action),
				"--workdir=/var/run/captf/work", "--home=/var/run/captf/home", "--lock-timeout=600s",
				// T2: the object's namespace and state suffix.
				"--state-namespace=team-a", "--state-suffix=prod.eu-west-1-cluster",
				// O1: the result document in the termination message.
				"--result=/dev/termination-log", "--image=" + testModuleImage}, c.Command)
			require.Equal(t, "/dev/termination-log", c.TerminationMessagePath)
			require.Equal(t, corev1.TerminationMessageReadFile, c.TerminationMessagePolicy, "O1: never the log's tail")
			require.Nil(t, c.Args, "J6: no --chdir, the runner copies the image's working directory")
			m := mount(t, c, RunnerVolumeName)
			require.Equal(t, RunnerDir, m.MountPath)
			require.True(t, m.ReadOnly)

			vol := volume(t, pod, RunnerVolumeName)
			require.Equal(t, &corev1.EmptyDirVolumeSource{}, vol.EmptyDir)
			require.Len(t, pod.Volumes, 5)
		})
	}
	require.Equal(t, RunnerDir+"/captf", RunnerPath)
}

// TestGracePeriodAboveRunnerStopTimeout keeps TerminationGracePeriodSeconds
// above the runner's --stop-timeout default, so the runner kills a stuck
// Terraform and reports it before the kubelet kills the runner.
func TestGracePeriodAboveRunnerStopTimeout(t *testing.T) {
	require.Less(t, runner.DefaultStopTimeout, time.Duration(TerminationGracePeriodSeconds)*time.Second)
}

func TestBuildNoAliasingOfParamsEnv(t *testing.T) {
	p := params(v1alpha1.JobActionApply)
	job := Build(p)
	env := job.Spec.Template.Spec.Containers[0].Env

	// After the J3 three and CAPTF_VARIABLES (T3).
	// Changing the result leaves the caller's slice alone...
	env[4].Value = "changed"
	env[5].ValueFrom.ConfigMapKeyRef.Key = "changed"
	env[5].ValueFrom.ConfigMapKeyRef.Name = "changed"
	require.Equal(t, "eu-west-1", p.Env[0].Value)
	require.Equal(t, "owner", p.Env[1].ValueFrom.ConfigMapKeyRef.Key)
	require.Equal(t, "team-info", p.Env[1].ValueFrom.ConfigMapKeyRef.Name)

	// ...and changing the caller's slice leaves the result alone.
	job = Build(p)
	p.Env[0].Value = "x"
	p.Env[1].ValueFrom.ConfigMapKeyRef.Key = "x"
	env = job.Spec.Template.Spec.Containers[0].Env
	require.Equal(t, "eu-west-1", env[4].Value)
	require.Equal(t, "owner", env[5].ValueFrom.ConfigMapKeyRef.Key)
}

func TestBuildDeterministic(t *testing.T) {
	require.Equal(t, Build(params(v1alpha1.JobActionApply)), Build(params(v1alpha1.JobActionApply)))
}

func TestAnnotationsRoundTrip(t *testing.T) {
	for _, gen := range []int64{1, 7, 1 << 40, 9223372036854775807} {
		p := params(v1alpha1.JobActionDestroy)
		p.Generation = gen
		job := Build(p)
		g, ok := GenerationOf(job)
		require.True(t, ok)
		require.Equal(t, gen, g)
		require.Equal(t, v1alpha1.JobActionDestroy, ActionOf(job))
		require.Equal(t, p.SourceHash, SourceHashOf(job))
	}
}

func TestAnnotationReadersOnForeignValues(t *testing.T) {
	job := func(a map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: a}}
	}
	for _, v := range []string{"", "seven", "7.0", " 7", "+7", "0x7", "99999999999999999999"} {
		_, ok := GenerationOf(job(map[string]string{v1alpha1.AnnotationJobGeneration: v}))
		require.False(t, ok, "%q", v)
	}
	_, ok := GenerationOf(job(nil))
	require.False(t, ok)
	_, ok = GenerationOf(nil)
	require.False(t, ok)

	for _, v := range []string{"", "Apply", "Plan", "refresh", "apply "} {
		require.Equal(t, v1alpha1.JobAction(""), ActionOf(job(map[string]string{v1alpha1.AnnotationJobAction: v})), "%q", v)
	}
	require.Equal(t, v1alpha1.JobAction(""), ActionOf(nil))
	require.Equal(t, "", SourceHashOf(nil))
	require.Equal(t, "", SourceHashOf(job(nil)))
}

func volume(t *testing.T, pod corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	require.FailNow(t, "no volume "+name)
	return corev1.Volume{}
}

func mount(t *testing.T, c corev1.Container, name string) corev1.VolumeMount {
	t.Helper()
	var found []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			found = append(found, m)
		}
	}
	require.Len(t, found, 1, "mounts of %s in %s", name, c.Name)
	return found[0]
}

// TestGoldenFilesHaveNoStrayFiles keeps testdata to the cases above, so a
// renamed case does not leave a stale golden file behind.
func TestGoldenFilesHaveNoStrayFiles(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".golden.yaml") {
			names = append(names, e.Name())
		}
	}
	require.ElementsMatch(t, []string{"apply.golden.yaml", "destroy.golden.yaml", "apply-minimal.golden.yaml", "apply-inputs.golden.yaml"}, names)
}

// K5, K6: with inputs, the Job is created suspended, mounts its run Secret
// read-only and has the runner read the inputs from it; the Job spec holds
// no input value, only the hash.
func TestBuildInputsK5K6(t *testing.T) {
	p := params(v1alpha1.JobActionApply)
	plain := Build(p)
	require.Nil(t, plain.Spec.Suspend, "no inputs: not suspended")
	require.NotContains(t, plain.Annotations, v1alpha1.AnnotationInputsHash)

	p.Inputs = true
	p.InputsHash = "abc"
	j := Build(p)
	require.Equal(t, ptr.To(true), j.Spec.Suspend)
	require.Equal(t, "abc", j.Annotations[v1alpha1.AnnotationInputsHash])
	require.Equal(t, "abc", InputsHashOf(j))
	var vol *corev1.Volume
	for i := range j.Spec.Template.Spec.Volumes {
		if j.Spec.Template.Spec.Volumes[i].Name == InputsVolumeName {
			vol = &j.Spec.Template.Spec.Volumes[i]
		}
	}
	require.NotNil(t, vol)
	require.Equal(t, RunSecretName(j.Name), vol.Secret.SecretName)
	require.Equal(t, "captf-run-"+j.Name, vol.Secret.SecretName)
	require.Equal(t, ptr.To(CredentialsFileMode), vol.Secret.DefaultMode)
	c := j.Spec.Template.Spec.Containers[0]
	require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: InputsVolumeName, MountPath: InputsDir, ReadOnly: true})
	require.Contains(t, c.Command, "--inputs="+InputsDir+"/"+InputsKey)
	require.Equal(t, plain.Spec.Template.Spec.Containers[0].Env, c.Env, "inputs never travel in env")
	// The re-apply name is the one the run Secret follows too.
	p.Reapply = 2
	j = Build(p)
	require.Equal(t, RunSecretName(j.Name), j.Spec.Template.Spec.Volumes[len(j.Spec.Template.Spec.Volumes)-1].Secret.SecretName)
	require.Equal(t, "captf-inputs-x-terraformcluster", InputsSecretName("x-terraformcluster"))
	require.Empty(t, InputsHashOf(nil))
}
