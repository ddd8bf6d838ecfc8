package workload

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/controllers/jobs"
)

const variableSecretValue = "tok-O9-S3CRET"

func variablesConfigMap(name string, labelled bool, data map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name}, Data: data}
	if labelled {
		cm.Labels = map[string]string{v1alpha1.LabelVariables: v1alpha1.LabelTrue}
	}
	return cm
}

func withVariablesFrom(from ...v1alpha1.VariablesFromSource) func(*v1alpha1.TerraformCluster) {
	return func(c *v1alpha1.TerraformCluster) { c.Spec.VariablesFrom = from }
}

func fromConfigMap(name string) v1alpha1.VariablesFromSource {
	return v1alpha1.VariablesFromSource{ConfigMapRef: &v1alpha1.LocalObjectReference{Name: name}}
}

// SPEC O9: variables from a labelled ConfigMap and Secret reach the run
// through its run Secret only (never the Job, status or events), later
// sources win, inline spec.variables win over all.
func TestO9VariablesFromObjects(t *testing.T) {
	f := newFixture(t)
	f.Secrets = append(f.Secrets, variableSecretValue)
	secretSource := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "vars",
		Labels: map[string]string{v1alpha1.LabelVariables: v1alpha1.LabelTrue}},
		Data: map[string][]byte{"token": []byte(`"` + variableSecretValue + `"`), "size": []byte(`5`)}}
	c := newCluster("c1", withVariablesFrom(
		fromConfigMap("net"),
		v1alpha1.VariablesFromSource{SecretRef: &v1alpha1.LocalObjectReference{Name: "vars"}, Format: v1alpha1.VariablesFormatJSON},
	), func(c *v1alpha1.TerraformCluster) {
		c.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"region":"inline"}`)}
	})
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c,
		variablesConfigMap("net", true, map[string]string{"region": "eu-1", "size": "3", "zone": "a"}))
	f.seedHidden(secretSource)
	f.showRuns = true

	require.NoError(t, f.sync(kindCluster, "c1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesReady)
	created := f.createdJobs()
	require.Len(t, created, 1)
	b, err := json.Marshal(created[0])
	require.NoError(t, err)
	require.NotContains(t, string(b), variableSecretValue, "O9: a Secret's value is never in the Job")
	in, err := contract.DecodeInputs(f.storedSecret(testNS, jobs.RunSecretName(created[0].Name)).Data[jobs.InputsKey])
	require.NoError(t, err)
	require.JSONEq(t, `"`+variableSecretValue+`"`, string(in["token"]))
	require.JSONEq(t, `5`, string(in["size"]), "the later source wins")
	require.JSONEq(t, `"a"`, string(in["zone"]))
	require.NotContains(t, in, "region", "inline spec.variables win (the runner's inline file)")
	require.Contains(t, in, contract.InputObject, "the contract inputs are still there")
	require.Equal(t, []string{"size", "token"}, in.Sensitive(), "the Secret's keys are sensitive (the runner keeps them out of its log)")
	f.checkNoSecretLeak()
}

// SPEC O9: a source that is missing or not labelled holds the apply back
// (DependenciesReady=False, VariablesSourceNotFound) unless optional; a
// bad key is VariablesInvalid; labelling the source lets the apply start.
func TestO9SourceProblems(t *testing.T) {
	for _, tt := range []struct {
		name    string
		from    v1alpha1.VariablesFromSource
		objects []runtime.Object
		reason  v1alpha1.ConditionReason
		message string
	}{
		{"missing", fromConfigMap("net"), nil, v1alpha1.ReasonVariablesSourceNotFound, "ConfigMap net does not exist"},
		{"unlabelled", fromConfigMap("net"), []runtime.Object{variablesConfigMap("net", false, map[string]string{"a": "hidden"})},
			v1alpha1.ReasonVariablesSourceNotFound, "ConfigMap net is not labelled captf.io/variables=true"},
		{"bad key", fromConfigMap("net"), []runtime.Object{variablesConfigMap("net", true, map[string]string{"captf_x": "v"})},
			v1alpha1.ReasonVariablesInvalid, `key "captf_x"`},
		{"optional missing", v1alpha1.VariablesFromSource{ConfigMapRef: &v1alpha1.LocalObjectReference{Name: "net"}, Optional: true}, nil, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(append([]runtime.Object{newSource(sourceData()), newIdentity(identityName, allowList(testNS)),
				newCluster("c1", withVariablesFrom(tt.from))}, tt.objects...)...)
			require.NoError(t, f.sync(kindCluster, "c1"))
			if tt.reason == "" {
				requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesReady)
				require.Len(t, f.createdJobs(), 1)
				return
			}
			c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, tt.reason)
			require.Contains(t, c.Message, tt.message)
			require.NotContains(t, c.Message, "hidden")
			require.Empty(t, f.createdJobs(), "no apply while the sources cannot be used")
		})
	}
}

// SPEC O9 (A3-26): a change of a source re-applies a cluster, as the next
// attempt with another inputs hash; the labelled sources' watch maps the
// source to the objects that name it.
func TestO9SourceChangeReapplies(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)),
		newCluster("c1", withVariablesFrom(fromConfigMap("net"))),
		variablesConfigMap("net", true, map[string]string{"size": "3"}))
	require.NoError(t, f.sync(kindCluster, "c1"))
	created := f.createdJobs()
	require.Len(t, created, 1)
	first := created[0]
	f.catchUp()
	f.finishAt(first.Name, jobSucceeded)
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "same inputs: nothing to apply")

	require.NoError(t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("configmaps"),
		variablesConfigMap("net", true, map[string]string{"size": "4"}), testNS))
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	created = f.createdJobs()
	require.Len(t, created, 1, "the source changed: re-apply")
	require.Equal(t, 2, jobs.AttemptOf(created[0]))
	require.NotEqual(t, first.Annotations[v1alpha1.AnnotationInputsHash], created[0].Annotations[v1alpha1.AnnotationInputsHash])

	keys, err := variablesSourceKeys(newCluster("c1", withVariablesFrom(fromConfigMap("net"),
		v1alpha1.VariablesFromSource{SecretRef: &v1alpha1.LocalObjectReference{Name: "s"}})))
	require.NoError(t, err)
	require.Equal(t, []string{testNS + "/ConfigMap/net", testNS + "/Secret/s"}, keys)
}
