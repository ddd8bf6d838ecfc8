package jobs

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// Paths, names and values of the Job. Other packages and tests use these
// rather than repeating the literals.
const (
	// CredentialsVolumeName is the pod volume holding the mirror Secret (SPEC J2).
	CredentialsVolumeName = "credentials"
	// CredentialsMountPath is where the Terraform container sees one file per
	// mirror key, read-only (SPEC J2). Modules read keys the runner drops
	// from the environment (J6) from here.
	CredentialsMountPath = "/var/run/captf/credentials"
	// CredentialsFileMode is the mode of those files (SPEC J2): 0440, no
	// write and nothing for others. The kubelet makes the files owned by root
	// and, when the pod sets securityContext.fsGroup, by that group; a module
	// image that runs as a non-root user without group 0 reads them only
	// through such an fsGroup (the environment copy works regardless).
	CredentialsFileMode int32 = 0o440

	// RunnerVolumeName is the emptyDir the init container installs the
	// runner into and the Terraform container runs it from (SPEC J5).
	RunnerVolumeName = "runner"
	// RunnerDir is where that volume is mounted in both containers (SPEC J5).
	RunnerDir = "/opt/captf/bin"
	// RunnerPath is the installed captf binary the Terraform container runs
	// as `captf runner apply|destroy` (SPEC J5).
	RunnerPath = RunnerDir + "/captf"

	// InitContainerName is the init container that runs the manager's
	// --runner-image and copies the captf binary to RunnerPath (SPEC J5).
	InitContainerName = "install-runner"
	// ContainerName is the container that runs the module image, and in it
	// the runner and Terraform (SPEC J5, J6).
	ContainerName = "terraform"

	// WorkVolumeName is the emptyDir holding the runner's writable copy of
	// the module directory (SPEC T2, T6), mounted at WorkDir.
	WorkVolumeName = "work"
	// WorkDir is the runner's --workdir: the module is copied here and
	// Terraform runs here, with the variables file (T3).
	WorkDir = "/var/run/captf/work"
	// HomeVolumeName is the emptyDir for Terraform's HOME (T6), at HomeDir.
	HomeVolumeName = "home"
	// HomeDir is the runner's --home, the HOME it gives Terraform.
	HomeDir = "/var/run/captf/home"
	// TmpVolumeName is the emptyDir mounted at TmpDir (T6): the root
	// filesystem is read-only.
	TmpVolumeName = "tmp"
	// TmpDir is /tmp.
	TmpDir = "/tmp"

	// InputsVolumeName is the run Secret's volume (SPEC K5, K6), mounted
	// read-only at InputsDir; the runner reads InputsKey from it.
	InputsVolumeName = "inputs"
	// RestoreVolumeName is a restore Job's projected volume of the backup
	// Secrets (SPEC O5), mounted read-only at RestoreDir.
	RestoreVolumeName = "restore"
	// RestoreDir is the runner's --restore-chunks: part i of the backup
	// is the file named i.
	RestoreDir = "/var/run/captf/restore"
	// InputsDir is where the run Secret's files are.
	InputsDir = "/var/run/captf/inputs"
	// InputsKey is the run Secret's key holding the contract inputs as a
	// JSON object.
	InputsKey = "inputs.json"
	// RunSecretPrefix starts the name of a Job's run Secret:
	// captf-run-<Job name> ([RunSecretName]).
	RunSecretPrefix = "captf-run-"
	// InputsSecretPrefix starts the name of an object's inputs Secret:
	// captf-inputs-<state suffix> ([InputsSecretName]).
	InputsSecretPrefix = "captf-inputs-"

	// DefaultLockTimeoutSeconds is the runner's --lock-timeout when the
	// object sets none and its deadline is at least twice as long (SPEC T8,
	// LockTimeoutSeconds).
	DefaultLockTimeoutSeconds int64 = 300

	// RunAsUser, RunAsGroup and [CredentialsGroup] (fsGroup) are the pod's
	// default identity (SPEC T6), unless spec.jobs.podSecurityContext sets
	// them: a non-root user, as Pod Security "restricted" requires.
	RunAsUser  int64 = 65532
	RunAsGroup int64 = 65532

	// DefaultActiveDeadlineSeconds is the Job's deadline when the object sets
	// none (SPEC J4; the CRD defaults spec.jobs.activeDeadlineSeconds to it).
	DefaultActiveDeadlineSeconds int64 = 3600

	// ResultPath is where the runner writes its result document (SPEC O1):
	// the Terraform container's termination message, which the kubelet
	// keeps in the pod's status (at most 4096 bytes) after the container
	// ends, for the manager to read once.
	ResultPath = corev1.TerminationMessagePathDefault

	// TerminationGracePeriodSeconds is how long the kubelet waits between
	// SIGTERM and SIGKILL when the Job's pod stops (deletion, or the J4
	// deadline). It is above the runner's --stop-timeout default
	// (runner.DefaultStopTimeout, 570s), so that the runner, not the kubelet,
	// kills a Terraform that does not stop, and still reports how it ended;
	// Terraform gets those 570s to release its state lock.
	TerminationGracePeriodSeconds int64 = 600
)

// Environment variables the Job itself sets (SPEC J3). The runner keeps
// exactly these three of the TF_ and KUBE_ names (J6).
const (
	EnvTFInAutomation = "TF_IN_AUTOMATION"
	EnvTFInput        = "TF_INPUT"
	EnvKubeNamespace  = "KUBE_NAMESPACE"
)

// EnvVariables carries spec.variables to the runner as compact JSON, which
// writes them as a variables file in the working copy (SPEC T3). It follows
// the J3 three; names starting with EnvReservedPrefix are the Job's: the CRD
// refuses them in spec.jobs.env and Build drops them from it.
const (
	EnvVariables      = "CAPTF_VARIABLES"
	EnvReservedPrefix = "CAPTF_"
)

// Params is everything a Job depends on. Two calls of [Build] with equal
// Params return equal Jobs.
type Params struct {
	// OwnerAPIVersion, OwnerKind, OwnerName and OwnerUID identify the
	// workload object (TerraformCluster, TerraformMachine or
	// TerraformMachinePool), the Job's controller owner (SPEC J1).
	// OwnerAPIVersion is "infrastructure.cluster.x-k8s.io/v1alpha1".
	OwnerAPIVersion string
	OwnerKind       string
	OwnerName       string
	OwnerUID        types.UID
	// Namespace is the object's namespace, where the Job and the mirror are.
	Namespace string
	// Generation is the object's metadata.generation this Job is for.
	Generation int64
	// Action is v1alpha1.JobActionApply, v1alpha1.JobActionDestroy,
	// v1alpha1.JobActionDrift (SPEC O7: `captf runner drift`) or
	// v1alpha1.JobActionRestore (O5: `captf runner restore`).
	Action v1alpha1.JobAction
	// ModuleImage is the object's spec.source.image.
	ModuleImage string
	// RunnerImage is the manager's --runner-image (SPEC J5).
	RunnerImage string
	// MirrorName is the mirror Secret in Namespace,
	// credentials.MirrorName(identity) (SPEC M1, J2).
	MirrorName string
	// ServiceAccountName is the ServiceAccount the pod runs as (SPEC T1):
	// the object's spec.jobs.serviceAccountName, else captf-runner. Empty
	// leaves the field unset (the namespace's default ServiceAccount).
	ServiceAccountName string
	// Env is the object's spec.jobs.env, already validated (no TF_*, KUBE_*
	// or HOME, SPEC A9). Build copies it.
	Env []corev1.EnvVar
	// ActiveDeadlineSeconds is the object's spec.jobs.activeDeadlineSeconds;
	// zero or less means DefaultActiveDeadlineSeconds (SPEC J4).
	ActiveDeadlineSeconds int64
	// SourceHash is the mirror's captf.io/source-hash when the Job is
	// created, recorded on the Job (SPEC C5); "" records nothing.
	SourceHash string
	// Identity is the identity whose mirror the Job uses, recorded on the
	// Job as captf.io/identity (SPEC C5); "" records nothing.
	Identity string
	// Reapply numbers a re-apply Job of the same generation after a
	// rotation (SPEC C6); 0 for the generation's first apply.
	Reapply int
	// Attempt numbers the Job among the Jobs of its action and generation
	// (SPEC T7); 0 or 1 for the first. A later attempt that is not a
	// re-apply is named by [AttemptName]; every attempt above 1 is recorded
	// as captf.io/attempt.
	Attempt int
	// DriftRemediation is recorded as captf.io/drift-remediation when
	// above 0 (SPEC O7).
	DriftRemediation int
	// Interruptions counts the attempts of the generation before this one
	// that were interrupted (SPEC O2), recorded as captf.io/interruptions
	// when above 0: the backoff does not count them.
	Interruptions int
	// Retry is the captf.io/retry value this Job acts on (SPEC T7),
	// recorded on the Job; "" records nothing.
	Retry string
	// Variables is the object's spec.variables as JSON (SPEC T3); nil, empty
	// or null sets no CAPTF_VARIABLES. Build compacts a copy.
	Variables []byte
	// LockTimeoutSeconds is the object's spec.jobs.lockTimeoutSeconds (SPEC
	// T8); nil means DefaultLockTimeoutSeconds, 0 no wait.
	LockTimeoutSeconds *int64
	// PodSecurityContext and SecurityContext are the object's
	// spec.jobs.podSecurityContext and spec.jobs.securityContext, merged
	// field by field over the T6 defaults; Build copies them.
	PodSecurityContext *corev1.PodSecurityContext
	SecurityContext    *corev1.SecurityContext
	// Inputs, when true, mounts the Job's run Secret (RunSecretName of the
	// Job's name), which holds the contract inputs (SPEC K5, K6), and has
	// the runner write them for Terraform. The Job is created suspended:
	// the manager creates the run Secret, owned by the Job, then resumes
	// it, so no pod starts before its inputs exist.
	Inputs bool
	// InputsHash is the hash of those inputs, recorded on the Job as
	// captf.io/inputs-hash (SPEC K6); "" records nothing.
	InputsHash string
	// Plan and ExpectPlan: the approved TerraformPlan an apply Job applies
	// and its fingerprint (SPEC O8): recorded as captf.io/plan, and the
	// runner's --expect-plan; "" for none.
	Plan, ExpectPlan string
	// GuardDeletes: an apply Job's runner applies nothing when its plan
	// deletes or replaces resources (SPEC O8's destructive guard, the
	// runner's --guard-deletes); not with ExpectPlan.
	GuardDeletes bool
	// Cluster is the TerraformCluster whose Job cap the Job counts under,
	// recorded as captf.io/cluster (SPEC O4); "" records nothing.
	Cluster string
	// Restore is the backup a restore Job pushes (SPEC O5); nil for any
	// other action.
	Restore *Restore
}

// Restore is the state backup a restore Job pushes (SPEC O5): its serial,
// recorded as captf.io/restore-serial, and its Secrets, first part first,
// mounted as the files 0, 1, ... of RestoreDir. The Job names them only;
// their content reaches the pod through the volume (X1).
type Restore struct {
	Serial  int64
	Secrets []string
}

// RunSecretName is the name of the run Secret of the Job named job (SPEC
// K5): it holds the run's inputs, is owned by the Job and deleted when
// the Job finishes.
func RunSecretName(job string) string { return RunSecretPrefix + job }

// InputsSecretName is the name of the inputs Secret of the object whose
// state suffix is suffix ([StateSuffix]): the inputs of its last apply,
// from which destroys and a provisioned machine's runs take theirs (SPEC
// K5: a machine pins what it was provisioned with).
func InputsSecretName(suffix string) string { return InputsSecretPrefix + suffix }

// Build returns the Job for p (SPEC J1-J5, C5). The result shares no memory
// with p. Fields the spec does not ask for are left unset (nil), so the API
// server's defaults apply and nothing is written as an explicit false or
// zero (J3).
func Build(p Params) *batchv1.Job {
	deadline := p.ActiveDeadlineSeconds
	if deadline <= 0 {
		deadline = DefaultActiveDeadlineSeconds
	}

	annotations := jobAnnotations(p)
	name := AttemptOrReapplyName(p)
	var suspend *bool
	if p.Inputs {
		// Resumed once the run Secret exists (SPEC K5).
		suspend = ptr.To(true)
	}

	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   p.Namespace,
			Labels:      managedLabels(),
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: p.OwnerAPIVersion,
				Kind:       p.OwnerKind,
				Name:       p.OwnerName,
				UID:        p.OwnerUID,
				// The controller reference makes the Job the object's (J1)
				// and lets the garbage collector delete it with the object.
				// BlockOwnerDeletion stays nil (J3): deleting the object
				// never waits on its Jobs, and the manager needs no permission
				// to update its owners' finalizers, which the API server's
				// OwnerReferencesPermissionEnforcement asks of anyone setting
				// blockOwnerDeletion=true.
				Controller: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			// One attempt (J4): a failed apply or destroy is reported, not
			// retried behind the user's back.
			BackoffLimit: ptr.To[int32](0),
			// SPEC O2: an interrupted pod fails the Job with reason
			// PodFailurePolicy, which the Job keeps after the pod is gone.
			PodFailurePolicy:      podFailurePolicy(),
			ActiveDeadlineSeconds: ptr.To(deadline),
			Suspend:               suspend,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels()},
				Spec:       podSpec(p),
			},
		},
	}
}

// jobAnnotations are the annotations that record on a Job what it runs
// (SPEC J1, C5, C6, T7, K6, O2, O4, O7); a zero value is left out.
func jobAnnotations(p Params) map[string]string {
	annotations := map[string]string{
		v1alpha1.AnnotationJobAction:     string(p.Action),
		v1alpha1.AnnotationJobGeneration: strconv.FormatInt(p.Generation, 10),
	}
	if p.SourceHash != "" {
		annotations[v1alpha1.AnnotationSourceHash] = p.SourceHash
	}
	if p.Identity != "" {
		// The identity controller finds an identity's Jobs by it (C5).
		annotations[v1alpha1.AnnotationIdentity] = p.Identity
	}
	if p.Reapply > 0 {
		annotations[v1alpha1.AnnotationJobReapply] = strconv.Itoa(p.Reapply)
	}
	if p.Attempt > 1 {
		annotations[v1alpha1.AnnotationJobAttempt] = strconv.Itoa(p.Attempt)
	}
	if p.DriftRemediation > 0 {
		annotations[v1alpha1.AnnotationJobDriftRemediation] = strconv.Itoa(p.DriftRemediation)
	}
	if p.Interruptions > 0 {
		annotations[v1alpha1.AnnotationJobInterruptions] = strconv.Itoa(p.Interruptions)
	}
	if p.Retry != "" {
		annotations[v1alpha1.AnnotationRetry] = p.Retry
	}
	if p.InputsHash != "" {
		annotations[v1alpha1.AnnotationInputsHash] = p.InputsHash
	}
	if p.Plan != "" {
		annotations[v1alpha1.AnnotationPlan] = p.Plan
	}
	if p.Cluster != "" {
		annotations[v1alpha1.AnnotationJobCluster] = p.Cluster
	}
	if p.Restore != nil {
		annotations[v1alpha1.AnnotationJobRestoreSerial] = strconv.FormatInt(p.Restore.Serial, 10)
	}
	return annotations
}

// AttemptOrReapplyName is the name [Build] gives the Job of p.
func AttemptOrReapplyName(p Params) string {
	if p.Reapply > 0 {
		return ReapplyName(p.OwnerKind, p.OwnerName, p.OwnerUID, p.Generation, p.Reapply)
	}
	return AttemptName(p.OwnerKind, p.OwnerName, p.OwnerUID, p.Action, p.Generation, p.Attempt)
}

// LockTimeoutSeconds is the lock wait of a Job (SPEC T8): the object's
// spec.jobs.lockTimeoutSeconds when set; unset, DefaultLockTimeoutSeconds,
// or half the deadline when the deadline (J4; DefaultActiveDeadlineSeconds
// when unset) is shorter than twice that, so the wait never eats the run.
func LockTimeoutSeconds(set *int64, deadline int64) int64 {
	if set != nil && *set >= 0 {
		return *set
	}
	if deadline <= 0 {
		deadline = DefaultActiveDeadlineSeconds
	}
	if deadline < 2*DefaultLockTimeoutSeconds {
		return deadline / 2
	}
	return DefaultLockTimeoutSeconds
}

// managedLabels returns a new map on each call so the Job's and the pod
// template's labels are not one map.
func managedLabels() map[string]string {
	return map[string]string{v1alpha1.LabelManaged: v1alpha1.LabelTrue}
}
