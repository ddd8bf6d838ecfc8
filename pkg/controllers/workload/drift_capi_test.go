package workload

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// O7 (A1-101): a pool Cluster API owns, without spec.drift of its own,
// takes its cluster's spec.defaults.drift: without defaults the flag's
// interval starts a drift Job; a default interval of 0 turns its checks
// off although the flag sets 30m.
func TestSyncO7PoolInheritsClusterDefaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		defaults *v1alpha1.DriftSpec
		want     bool
	}{
		{"no defaults: the flag's interval", nil, true},
		{"defaults interval 0: off", &v1alpha1.DriftSpec{IntervalSeconds: ptr.To[int32](0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, withDriftDefault(driftInterval))
			f.stampJobCreation()
			f.Secrets = append(f.Secrets, bootstrapValue, base64.StdEncoding.EncodeToString([]byte(bootstrapValue)))
			cl := newCluster("tc1", withCAPI, withStatus(provisionedStatus), func(o metav1.Object) {
				o.SetLabels(map[string]string{v1alpha1.LabelClusterName: capiClusterName})
			}, func(c *v1alpha1.TerraformCluster) {
				if tc.defaults != nil {
					c.Spec.Defaults = &v1alpha1.ClusterDefaults{Drift: tc.defaults}
				}
			})
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), cl)
			f.seedCAPI(capiCluster(capiClusterName, "tc1"))
			f.seed(newPool("tmp1", withCAPI, capiOwner(capiv1.KindMachinePool, "p1")))
			f.seedCAPI(capiPool("p1", "tmp1", ptr.To("p1-bootstrap"), 2))
			f.seedHidden(bootstrapSecret("p1-bootstrap", bootstrapValue))

			require.NoError(t, f.sync(kindPool, "tmp1"))
			created := f.createdJobs()
			require.Len(t, created, 1)
			f.catchUp()
			f.finishAt(created[0].Name, jobSucceeded)
			f.catchUp()
			require.NoError(t, f.sync(kindPool, "tmp1"))
			require.Empty(t, f.createdJobs())
			f.catchUp()

			f.Clock.Step(24 * time.Hour)
			require.NoError(t, f.sync(kindPool, "tmp1"))
			var drift []string
			for _, j := range f.createdJobs() {
				if jobs.ActionOf(j) == v1alpha1.JobActionDrift {
					drift = append(drift, j.Name)
				}
			}
			require.Equal(t, tc.want, len(drift) == 1, "drift Jobs %v; actions %v", drift, f.allActions())
		})
	}
}

// O7: the drift action: the object's own, else, for a pool, its
// cluster's default; a machine reports only, whatever the default says.
func TestDriftActionO7(t *testing.T) {
	f := newFixture(t)
	remediate := &v1alpha1.DriftSpec{Action: v1alpha1.DriftRemediate}
	cl := newCluster("tc1", func(c *v1alpha1.TerraformCluster) { c.Spec.Defaults = &v1alpha1.ClusterDefaults{Drift: remediate} })
	pool := wrapPool(newPool("p"))
	pool.kind, pool.contract.cluster = f.c.kinds[kindPool], cl
	require.Equal(t, v1alpha1.DriftRemediate, driftAction(pool), "a pool takes the cluster's default")
	own := wrapPool(newPool("p", func(p *v1alpha1.TerraformMachinePool) {
		p.Spec.Drift = &v1alpha1.DriftSpec{Action: v1alpha1.DriftReport}
	}))
	own.kind, own.contract.cluster = f.c.kinds[kindPool], cl
	require.Equal(t, v1alpha1.DriftReport, driftAction(own), "its own action wins")
	m := wrapMachine(newMachine("m"))
	m.kind, m.contract.cluster = f.c.kinds[kindMachine], cl
	require.Equal(t, v1alpha1.DriftReport, driftAction(m), "a machine reports only")
	c := wrapCluster(newCluster("c", func(c *v1alpha1.TerraformCluster) { c.Spec.Drift = remediate }))
	c.kind = f.c.kinds[kindCluster]
	require.Equal(t, v1alpha1.DriftRemediate, driftAction(c))
}
