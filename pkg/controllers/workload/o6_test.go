package workload

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runresult"
)

// Tests of SPEC O6: digest pinning from the pod of a successful apply.

var pinDigest = "sha256:" + strings.Repeat("12", 32)

// succeededDoc is the runner's document of a successful apply of image.
func succeededDoc(t *testing.T, image string) string {
	t.Helper()
	b, err := (&runresult.Result{Version: runresult.Version, Operation: runresult.OperationApply, Image: image,
		Steps: []runresult.Step{{Name: "init"}, {Name: "apply"}}}).Marshal()
	require.NoError(t, err)
	return string(b)
}

// O6: a successful apply's pod imageID is recorded in status.source; a
// machine's destroy then runs repository@digest, a cluster's runs its tag.
func TestSyncO6PinsFromTheApplysPod(t *testing.T) {
	for _, kind := range []string{v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformCluster} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			obj := workloadOf(kind, "obj", withFinalizer)
			j := newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded)
			pod := runPod(j, "p", true, 0, succeededDoc(t, moduleImage))
			pod.Status.ContainerStatuses[0].ImageID = "registry.example.com/modules/network@" + pinDigest
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
				newMirror(identityName, testNS, sourceData(), refOf(kind, obj)), j, pod)

			require.NoError(t, f.sync(kind, "obj"))
			st := f.lastStatus()
			require.Equal(t, &v1alpha1.SourceStatus{Image: moduleImage, ImageDigest: pinDigest}, st.Source)
			require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventDigestPinned)

		})
	}
}

// O6: a deleting machine pinned for its image destroys with
// repository@digest; a cluster, or a machine whose spec names another
// image than the pinned one, destroys with the spec's image.
func TestSyncO6DestroyImage(t *testing.T) {
	pinned := &v1alpha1.SourceStatus{Image: moduleImage, ImageDigest: pinDigest}
	byDigest := "registry.example.com/modules/network@" + pinDigest
	for _, tt := range []struct {
		name, kind string
		src        *v1alpha1.SourceStatus
		want       string
	}{
		{"machine pinned", v1alpha1.KindTerraformMachine, pinned, byDigest},
		{"machine not pinned", v1alpha1.KindTerraformMachine, nil, moduleImage},
		{"machine pinned for another image", v1alpha1.KindTerraformMachine, &v1alpha1.SourceStatus{Image: "registry.example.com/modules/network:v0", ImageDigest: pinDigest}, moduleImage},
		{"cluster pinned", v1alpha1.KindTerraformCluster, pinned, moduleImage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			obj := workloadOf(tt.kind, "obj", deleting, withStatus(func(st *v1alpha1.WorkloadStatus) {
				st.Source = tt.src.DeepCopy()
				st.LastApply = &v1alpha1.RunRecord{Generation: 1, JobName: "obj-apply", Outcome: v1alpha1.RunSucceeded, Attempt: 1, FinishTime: metav1.NewTime(epoch.Add(-time.Hour))}
				st.LastRun = &v1alpha1.LastRun{Job: "obj-apply", Operation: v1alpha1.JobActionApply, Outcome: v1alpha1.RunSucceeded}
			}))
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
				newMirror(identityName, testNS, sourceData(), refOf(tt.kind, obj)))

			require.NoError(t, f.sync(tt.kind, "obj"))
			js := f.createdJobs()
			require.Len(t, js, 1)
			require.Equal(t, "destroy", js[0].Annotations[v1alpha1.AnnotationJobAction])
			require.Equal(t, tt.want, moduleImageOf(js[0]))
		})
	}
}

// moduleImageOf is the image of a Job's Terraform container.
func moduleImageOf(j *batchv1.Job) string {
	for _, c := range j.Spec.Template.Spec.Containers {
		if c.Name == jobs.ContainerName {
			return c.Image
		}
	}
	return ""
}

// O6: a pod that ran a local image (no pullable digest) pins nothing and
// says so once; a document naming another image than the spec pins
// nothing.
func TestSyncO6NoPin(t *testing.T) {
	for _, tt := range []struct {
		name, imageID, docImage string
		event                   string
	}{
		{"local image", pinDigest, moduleImage, "Warning " + v1alpha1.EventDigestUnknown},
		{"another image", "registry.example.com/modules/network@" + pinDigest, "registry.example.com/evil:v1", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer)
			j := newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded)
			pod := runPod(j, "p", true, 0, succeededDoc(t, tt.docImage))
			pod.Status.ContainerStatuses[0].ImageID = tt.imageID
			f.seedReady(c1, j)
			f.seed(pod)
			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			require.Nil(t, f.lastStatus().Source)
			reasons := eventReasons(f.PopEvents())
			require.NotContains(t, reasons, "Normal "+v1alpha1.EventDigestPinned)
			if tt.event != "" {
				require.Contains(t, reasons, tt.event)
			}
		})
	}
}
