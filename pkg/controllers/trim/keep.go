package trim

import (
	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/pkg/plans"
)

// Keep is what a cache keeps of one kind's labels and annotations: each
// key kept maps to who reads it (the comment a reviewer checks).
type Keep struct {
	// AllLabels keeps every label (a label selector may name any).
	AllLabels bool
	// Labels and Annotations are the keys kept, each with its reader.
	Labels      map[string]string
	Annotations map[string]string
}

// The keep-lists, one per kind the manager caches. Keys are exact: no
// prefix, so a tenant cannot fill a cache under one.
var (
	// Workload is TerraformCluster, TerraformMachine and
	// TerraformMachinePool. Their status is kept whole (the manager writes it).
	Workload = Keep{
		Labels: map[string]string{
			v1alpha1.LabelClusterName: "a machine's or pool's cluster (SPEC 1.2, I3): index.Cluster, credentials.SelectCluster, index.LiveUser",
		},
		Annotations: map[string]string{
			v1alpha1.AnnotationPaused:                   "T5: workload paused() stops every Job",
			v1alpha1.AnnotationAbandonInfrastructure:    "V2: workload syncDeleting releases without a destroy when it names the UID",
			v1alpha1.AnnotationRetry:                    "T7: workload runs.go, a new value runs the action once more",
			v1alpha1.AnnotationRestoreState:             "O5: workload restore.go, a new value runs a restore Job once",
			v1alpha1.AnnotationProviderFieldsGeneration: "T5: workload coversGeneration, the generation the manager's own write made",
			v1alpha1.AnnotationStandalone:               "K2: contract.Standalone, runs without Cluster API owners",
			capiv1.AnnotationClonedFromName:             "K6: contract.RenderInputs, the template tag of captf_tags",
			v1alpha1.AnnotationBlockMove:                "K11: clusterctl move waits while it is set (kept so the manager sees its own mark)",
			v1alpha1.AnnotationDeleteForMove:            "K11: workload deleting.go and move.go, a deletion by clusterctl move starts no destroy",
		},
	}

	// Plan is TerraformPlan (SPEC O8): the labels the manager writes
	// (A1-146) and the annotations pkg/plans reads. Approvers may update
	// plans: any other label of theirs stays out of the cache (B12).
	Plan = Keep{
		Labels: map[string]string{
			plans.LabelPhase:       "O8: workload setPlanPhase, written only when the cached phase label differs",
			plans.LabelReason:      "O8: written at creation (A1-146); kept so the copy says why the plan exists",
			plans.LabelDestructive: "O8: written at creation (A1-146); kept so the copy says whether the plan deletes",
			plans.LabelClusterName: "O8: written at creation (A1-146); the plan's Cluster",
		},
		Annotations: map[string]string{
			v1alpha1.AnnotationJobGeneration: "O8: plans.Plan.Generation, the target's generation the plan is for",
			v1alpha1.AnnotationPlanJob:       "O8: plans.Plan.Job, the plan Job the plan was made from",
		},
	}

	// Identity is TerraformClusterIdentity: the manager reads no label or
	// annotation of it. Its status is kept whole (the manager writes it).
	Identity = Keep{}

	// Namespace keeps every label (allowedNamespaces.selector, N4-N5) and no
	// annotation; [Namespace] also drops the spec and all status but the phase.
	Namespace = Keep{AllLabels: true}

	// Job is the Jobs labelled captf.io/managed=true (the manager's and
	// look-alikes, B2).
	Job = Keep{
		Labels: map[string]string{
			v1alpha1.LabelManaged: "the informer's selector (J1); kept so the copy says why it is cached",
		},
		Annotations: map[string]string{
			v1alpha1.AnnotationIdentity:            "C5: index.JobIdentity, which identity's credentials the Job runs with",
			v1alpha1.AnnotationSourceHash:          "C5, T7: identity compute (current credentials), workload recordOf",
			v1alpha1.AnnotationJobGeneration:       "J1: jobs.GenerationOf, the generation the Job applies",
			v1alpha1.AnnotationJobAction:           "J1, J8, O7: jobs.ActionOf, apply, destroy or drift",
			v1alpha1.AnnotationJobReapply:          "C6: jobs.ReapplyOf",
			v1alpha1.AnnotationJobAttempt:          "T7: jobs.AttemptOf",
			v1alpha1.AnnotationJobDriftRemediation: "O7: jobs.DriftRemediationOf, the row of drift remediations the Job is part of",
			v1alpha1.AnnotationJobInterruptions:    "O2: jobs.InterruptionsOf, attempts not counted towards the backoff",
			v1alpha1.AnnotationRetry:               "T7: jobs.RetryOf, the captf.io/retry value the Job ran for",
			v1alpha1.AnnotationInputsHash:          "K6: jobs.InputsHashOf, the contract inputs the Job ran with",
			v1alpha1.AnnotationJobCluster:          "O4: workload slots.go, the cluster whose cap the Job counts against",
			v1alpha1.AnnotationJobRestoreSerial:    "O5: jobs.RestoreSerialOf, the serial a restore Job pushes (not run again)",
			"captf.io/plan":                        "O8: the TerraformPlan an apply Job applies (plans.Apply.Plan)",
		},
	}

	// Mirror is the Secrets labelled captf.io/mirrored=true (mirrors and
	// look-alikes, B2); [credentials.TrimSecretForCache] replaces their data
	// by its hash.
	Mirror = Keep{
		Labels: map[string]string{
			v1alpha1.LabelMirrored: "M3, M7, B2: credentials.ForeignReason and CompareMirror; the informer's selector (M9)",
			v1alpha1.LabelManaged:  "M3: credentials.CompareMirror",
		},
		Annotations: map[string]string{
			v1alpha1.AnnotationIdentity:          "M3, S2: index.MirrorIdentity, credentials.ForeignReason",
			v1alpha1.AnnotationSourceHash:        "M4, M6, S2: credentials.CompareMirror, identity compute (current or stale)",
			credentials.CachedDataHashAnnotation: "B1: the hash of the data the cache dropped, set by the transform itself",
		},
	}
)

// NotKept lists the label and annotation constants of the API packages
// (v1alpha1 and the Cluster API subset) that no list above keeps, each with
// why: they are read from uncached objects, only written, or read on Cluster
// API objects, whose informers (pkg/capi) keep their own lists.
// TestEveryWellKnownKeyIsClassified checks that every constant is kept by
// some list above or named here.
var NotKept = map[string]string{
	v1alpha1.LabelCredential:                "C1: read on the source Secret, which is read uncached (M6)",
	v1alpha1.AnnotationCredentialIdentities: "C1: read on the source Secret, which is read uncached (M6)",
	v1alpha1.LabelRunner:                    "T1: read on a ServiceAccount, read uncached",
	v1alpha1.LabelMoveHierarchy:             "set on the identity CRD by the manifests; read by clusterctl, not the manager",
	capiv1.LabelControlPlane:                "K6: read on Cluster API Machines, which pkg/capi caches with its own list",
	v1alpha1.LabelVariables:                 "O9: the selector of the variables sources' metadata watches, which keep name and version only (capi.TrimToName); the sources are read uncached",
	v1alpha1.AnnotationAppliedSpec:          "K11: read on state Secrets, listed uncached (metadata, paged: workload stateSecrets keeps only it and applied-inputs)",
	v1alpha1.AnnotationAppliedInputs:        "K11: read on state Secrets, listed uncached (metadata, paged: workload stateSecrets)",
}
