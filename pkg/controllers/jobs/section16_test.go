package jobs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// TestBuildT6Defaults: without overrides every default of SPEC T6 is set,
// on the pod and on both containers.
func TestBuildT6Defaults(t *testing.T) {
	p := params(v1alpha1.JobActionApply)
	p.PodSecurityContext, p.SecurityContext = nil, nil
	pod := Build(p).Spec.Template.Spec

	require.Equal(t, &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](65532),
		RunAsGroup:     ptr.To[int64](65532),
		FSGroup:        ptr.To[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}, pod.SecurityContext)
	require.Equal(t, RunAsUser, CredentialsGroup)

	want := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
	require.Len(t, pod.InitContainers, 1)
	require.Len(t, pod.Containers, 1)
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		require.Equal(t, want, c.SecurityContext, c.Name)
	}

	// The root filesystem is read-only: the three emptyDirs are what the
	// Terraform container can write, besides nothing else.
	c := pod.Containers[0]
	for name, path := range map[string]string{WorkVolumeName: "/var/run/captf/work", TmpVolumeName: "/tmp", HomeVolumeName: "/var/run/captf/home"} {
		require.Equal(t, &corev1.EmptyDirVolumeSource{}, volume(t, pod, name).EmptyDir, name)
		m := mount(t, c, name)
		require.Equal(t, path, m.MountPath, name)
		require.False(t, m.ReadOnly, name)
	}
	for _, m := range pod.InitContainers[0].VolumeMounts {
		require.Equal(t, RunnerVolumeName, m.Name, "the init container writes only the runner volume")
	}
}

// TestBuildT6OverridesMergeFieldByField: a field the object sets replaces
// the default, the others keep it; the init container keeps the defaults.
func TestBuildT6OverridesMergeFieldByField(t *testing.T) {
	defPod := PodSecurityContext(nil)
	defCtr := ContainerSecurityContext(nil)
	for _, tc := range []struct {
		name    string
		pod     *corev1.PodSecurityContext
		ctr     *corev1.SecurityContext
		wantPod func(*corev1.PodSecurityContext)
		wantCtr func(*corev1.SecurityContext)
	}{
		{name: "empty overrides keep every default", pod: &corev1.PodSecurityContext{}, ctr: &corev1.SecurityContext{}},
		{name: "runAsUser replaces 65532 only",
			pod:     &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
			wantPod: func(sc *corev1.PodSecurityContext) { sc.RunAsUser = ptr.To[int64](1000) }},
		{name: "runAsNonRoot false, fsGroup and supplementalGroups",
			pod: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false), FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{3000}},
			wantPod: func(sc *corev1.PodSecurityContext) {
				sc.RunAsNonRoot, sc.FSGroup, sc.SupplementalGroups = ptr.To(false), ptr.To[int64](2000), []int64{3000}
			}},
		{name: "seccompProfile replaced whole",
			pod: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("tf.json")}},
			wantPod: func(sc *corev1.PodSecurityContext) {
				sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("tf.json")}
			}},
		{name: "readOnlyRootFilesystem false and runAsUser on the container",
			ctr: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false), RunAsUser: ptr.To[int64](1000)},
			wantCtr: func(sc *corev1.SecurityContext) {
				sc.ReadOnlyRootFilesystem, sc.RunAsUser = ptr.To(false), ptr.To[int64](1000)
			}},
		{name: "capabilities.drop replaced, explicit falses kept",
			ctr: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}, Privileged: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false)},
			wantCtr: func(sc *corev1.SecurityContext) {
				sc.Capabilities.Drop, sc.Privileged = []corev1.Capability{"NET_RAW"}, ptr.To(false)
			}},
		{name: "values the CRD refuses are dropped (object stored without validation)",
			ctr: &corev1.SecurityContext{Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(true),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := params(v1alpha1.JobActionApply)
			p.PodSecurityContext, p.SecurityContext = tc.pod, tc.ctr
			pod := Build(p).Spec.Template.Spec
			wantPod, wantCtr := defPod.DeepCopy(), defCtr.DeepCopy()
			if tc.wantPod != nil {
				tc.wantPod(wantPod)
			}
			if tc.wantCtr != nil {
				tc.wantCtr(wantCtr)
			}
			require.Equal(t, wantPod, pod.SecurityContext)
			require.Equal(t, wantCtr, pod.Containers[0].SecurityContext)
			require.Equal(t, defCtr, pod.InitContainers[0].SecurityContext, "the init container keeps the defaults")
		})
	}
}

// TestBuildT6NoAliasing: Build copies the overrides.
func TestBuildT6NoAliasing(t *testing.T) {
	p := params(v1alpha1.JobActionApply)
	p.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}}
	pod := Build(p).Spec.Template.Spec
	pod.SecurityContext.RunAsUser = ptr.To[int64](1)
	pod.Containers[0].SecurityContext.Capabilities.Drop[0] = "X"
	require.Equal(t, int64(1000), *p.PodSecurityContext.RunAsUser)
	require.Equal(t, corev1.Capability("NET_RAW"), p.SecurityContext.Capabilities.Drop[0])
	require.Nil(t, p.SecurityContext.AllowPrivilegeEscalation)
}

// TestBuildT8LockTimeout: --lock-timeout from the object, 300 s by default,
// 0 kept (no wait).
func TestBuildT8LockTimeout(t *testing.T) {
	for _, tc := range []struct {
		in       *int64
		deadline int64
		want     string
	}{
		{in: nil, want: "--lock-timeout=300s"},
		{in: ptr.To[int64](0), want: "--lock-timeout=0s"},
		{in: ptr.To[int64](59), want: "--lock-timeout=59s"},
		{in: ptr.To[int64](-1), want: "--lock-timeout=300s"},
		// T8 as amended: unset, half a deadline shorter than 600 s.
		{in: nil, deadline: 600, want: "--lock-timeout=300s"},
		{in: nil, deadline: 599, want: "--lock-timeout=299s"},
		{in: nil, deadline: 120, want: "--lock-timeout=60s"},
		{in: nil, deadline: 1, want: "--lock-timeout=0s"},
		{in: ptr.To[int64](100), deadline: 120, want: "--lock-timeout=100s"},
	} {
		p := params(v1alpha1.JobActionDestroy)
		p.LockTimeoutSeconds = tc.in
		p.ActiveDeadlineSeconds = tc.deadline
		cmd := Build(p).Spec.Template.Spec.Containers[0].Command
		require.Contains(t, cmd, tc.want, "in=%v", ptr.Deref(tc.in, -99))
		require.Equal(t, "destroy", cmd[2])
	}
	require.Equal(t, int64(300), DefaultLockTimeoutSeconds)
}

// TestBuildT3VariablesEnv: CAPTF_VARIABLES is compact JSON after the J3
// three, absent without variables.
func TestBuildT3VariablesEnv(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" means absent
	}{
		{in: "", want: ""},
		{in: "null", want: ""},
		{in: " null\n", want: ""},
		{in: "{}", want: "{}"},
		{in: "{\n  \"a\": 1,\n  \"b\": {\"c\": [true, null]}\n}", want: `{"a":1,"b":{"c":[true,null]}}`},
		{in: `{"s":"a b"}`, want: `{"s":"a b"}`},
	} {
		p := params(v1alpha1.JobActionApply)
		p.Variables = []byte(tc.in)
		env := Build(p).Spec.Template.Spec.Containers[0].Env
		if tc.want == "" {
			require.Equal(t, "AWS_REGION", env[3].Name, "in=%q", tc.in)
			continue
		}
		require.Equal(t, corev1.EnvVar{Name: EnvVariables, Value: tc.want}, env[3], "in=%q", tc.in)
	}
	p := params(v1alpha1.JobActionApply)
	p.Variables = nil
	for _, e := range Build(p).Spec.Template.Spec.Containers[0].Env {
		require.NotEqual(t, EnvVariables, e.Name)
	}
}

func TestValidateVariables(t *testing.T) {
	keys := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"v%d":%d`, i, i)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	for _, tc := range []struct {
		in      string
		wantErr string // "" means valid
	}{
		{in: ""},
		{in: "null"},
		{in: "{}"},
		{in: `{"region":"eu","_x":1,"a-b_9":[1,{"c":null}],"Z":true}`},
		{in: keys(256)},
		{in: `{"big":"` + strings.Repeat("x", MaxVariablesBytes-10) + `"}`},
		{in: `{"big":"` + strings.Repeat("x", MaxVariablesBytes-9) + `"}`, wantErr: "more than 65536"},
		{in: keys(257), wantErr: "257 keys, more than 256"},
		{in: `["a"]`, wantErr: "must be a JSON object"},
		{in: `"a"`, wantErr: "must be a JSON object"},
		{in: `{"a":`, wantErr: "not valid JSON"},
		{in: `{"1st":1,"a.b":2,"":3,"ok":4}`, wantErr: `not Terraform identifiers (a letter or _, then letters, digits, _ or -): "", "1st", "a.b"`},
		{in: `{"captf_state":1,"captf_":2,"Captf_x":3}`, wantErr: `reserved prefix captf_: "captf_", "captf_state"`},
		// K6: the contract inputs' names are reserved too.
		{in: `{"machine_name":1,"bootstrap_data":2,"replicas":3,"machine":4}`, wantErr: `reserved for the Cluster API contract inputs (SPEC K6): "bootstrap_data", "machine_name", "replicas"`},
		{in: `{"1a":1,"1b":2,"1c":3,"1d":4,"1e":5,"1f":6,"1g":7}`, wantErr: `"1a", "1b", "1c", "1d", "1e" and 2 more`},
	} {
		err := ValidateVariables([]byte(tc.in))
		if tc.wantErr == "" {
			require.NoError(t, err, "in=%.40q", tc.in)
			continue
		}
		require.ErrorContains(t, err, tc.wantErr, "in=%.40q", tc.in)
	}
	// Keys are named, values never.
	err := ValidateVariables([]byte(`{"1x":"do-not-show-me"}`))
	require.ErrorContains(t, err, `"1x"`)
	require.NotContains(t, err.Error(), "do-not-show-me")
}
