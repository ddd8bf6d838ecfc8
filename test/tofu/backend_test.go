package tofu

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	statefile "github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// backendOverride is what the runner injects (SPEC T2): an override file
// replaces any backend the module declares, and sets one when it has none.
const backendOverride = `terraform {
  backend "kubernetes" {}
}
`

// The kubernetes backend against a real kube-apiserver, as a user holding
// exactly the T1 permissions (Secrets get/list/create/update/delete, Leases
// get/create/update/delete) in one namespace: apply writes the state Secret
// tfstate-default-<suffix> and holds the Lease lock-tfstate-default-<suffix>
// while it runs; destroy, from a fresh working copy as the destroy Job has,
// reads the same state and deletes the resource apply created. The apply also
// runs the R3 probe: the credential file is rotated while apply runs, the
// file's new credential is accepted, the environment's old one is not.
func TestModuleKubernetesBackend(t *testing.T) {
	requireTofu(t)
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "tofu", nil)
	grantT1(t, e, ns, controlplane.Alice)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, e.CP.WriteKubeconfig(kubeconfig, controlplane.Alice))

	bin := buildFakecloud(t)
	c := startCloud(t, bin, tokenA)
	const suffix = "demo-cluster" // T2: <name>-<kind>
	secretName, leaseName := "tfstate-default-"+suffix, "lock-tfstate-default-"+suffix
	id := moduleID(ns, "demo")
	vars := map[string]any{
		"name":                  "demo",
		"namespace":             ns,
		"fakecloud_endpoint":    c.url,
		"credential_file":       c.credentialFile,
		"rotation_wait_seconds": 240,
	}
	initArgs := []string{"init", "-input=false",
		"-backend-config=secret_suffix=" + suffix,
		"-backend-config=namespace=" + ns,
		"-backend-config=config_path=" + kubeconfig,
	}

	w := newWorkdir(t, vars, tofuEnv(t, bin, tokenA))
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "captf_override.tf"), []byte(backendOverride), 0o644))
	initOut := w.mustRun(t, initArgs...)
	t.Logf("tofu init:\n%s", initOut)
	afterInit, err := e.Kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	require.NoError(t, err, "init already writes an empty state")
	t.Logf("state after init: %s", redactedState(t, afterInit))

	wait := w.start(t, "apply", "-auto-approve", "-input=false", "-lock-timeout=60s")
	// While apply waits for the rotation, it holds the lock.
	var held *coordinationv1.Lease
	deadline := time.Now().Add(4 * time.Minute)
	for held == nil {
		l, err := e.Kube.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && len(requestsTo(c.seen(t), "GET", "/resources/"+id)) == 1 {
			held = l
			break
		}
		require.True(t, time.Now().Before(deadline), "apply never got to the rotation probe holding the lock")
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("lock Lease during apply:\n%s", toYAML(t, held))
	assert.Equal(t, map[string]string{
		"tfstate": "true", "tfstateSecretSuffix": suffix, "tfstateWorkspace": "default", "app.kubernetes.io/managed-by": "terraform",
	}, held.Labels)
	var lockInfo struct {
		ID        string `json:"ID"`
		Operation string `json:"Operation"`
	}
	require.NoError(t, json.Unmarshal([]byte(held.Annotations["app.terraform.io/lock-info"]), &lockInfo))
	assert.Equal(t, "OperationTypeApply", lockInfo.Operation)
	assert.Equal(t, lockInfo.ID, *held.Spec.HolderIdentity)

	// T8: a second run of the same state waits for the lock, here 2 s, then
	// fails without touching anything.
	other := newWorkdir(t, vars, tofuEnv(t, bin, tokenA))
	require.NoError(t, os.WriteFile(filepath.Join(other.dir, "captf_override.tf"), []byte(backendOverride), 0o644))
	other.mustRun(t, initArgs...)
	lockedOut, code := other.run(t, "apply", "-auto-approve", "-input=false", "-lock-timeout=2s")
	t.Logf("second apply while the first holds the lock (exit %d):\n%s", code, lockedOut)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, lockedOut, "Error acquiring the state lock")
	assert.Contains(t, lockedOut, lockInfo.ID, "the error names the holder's lock ID")
	assert.Len(t, requestsTo(c.seen(t), "PUT", "/resources/"+id), 1, "the locked-out run created nothing")

	c.rotate(t, tokenB)
	applyOut, code := wait()
	t.Logf("tofu apply (kubernetes backend):\n%s", applyOut)
	require.Equal(t, 0, code)
	assert.NotContains(t, applyOut, tokenA)
	assert.NotContains(t, applyOut, tokenB)
	assert.Contains(t, applyOut, `{"rotated":true,"file":200,"env":401}`)

	// R3 as the fake cloud saw it: after the rotation, the file's credential
	// is the current one, the environment's the previous one.
	seen := c.seen(t)
	who := requestsTo(seen, "GET", "/whoami")
	require.GreaterOrEqual(t, len(who), 2, describe(seen))
	lastFile, lastEnv := who[len(who)-2], who[len(who)-1]
	assert.Equal(t, []string{"file", "current", "2"}, []string{lastFile.Source, lastFile.Credential, itoa(lastFile.Generation)}, describe(seen))
	assert.Equal(t, []string{"env", "previous", "1"}, []string{lastEnv.Source, lastEnv.Credential, itoa(lastEnv.Generation)}, describe(seen))
	assert.Equal(t, 401, lastEnv.Status)

	// The lock is released, not deleted.
	lease, err := e.Kube.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, lease.Spec.HolderIdentity)
	assert.NotContains(t, lease.Annotations, "app.terraform.io/lock-info")
	t.Logf("lock Lease after apply:\n%s", toYAML(t, lease))

	// The state Secret, in the format T4 reads.
	secret, err := e.Kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"tfstate": "true", "tfstateSecretSuffix": suffix, "tfstateWorkspace": "default", "app.kubernetes.io/managed-by": "terraform",
	}, secret.Labels)
	assert.Equal(t, map[string]string{"encoding": "gzip"}, secret.Annotations)
	assert.Equal(t, corev1.SecretTypeOpaque, secret.Type)
	assert.Equal(t, []string{"tfstate"}, keys(secret.Data))
	assert.Empty(t, secret.OwnerReferences)
	state := decodeState(t, secret.Data["tfstate"])
	assert.Equal(t, "1.12.6", state.TerraformVersion)
	assert.Equal(t, 4, state.Version)
	assert.JSONEq(t, `{"value":"`+id+`","type":"string"}`, string(state.Outputs["resource_id"]))
	assert.JSONEq(t, `{"value":{"host":"`+id+`.fakecloud.test","port":6443},"type":["object",{"host":"string","port":"number"}]}`,
		string(state.Outputs["control_plane_endpoint"]))
	var token struct {
		Sensitive bool `json:"sensitive"`
	}
	require.NoError(t, json.Unmarshal(state.Outputs["admin_token"], &token))
	assert.True(t, token.Sensitive)
	t.Logf("state Secret after apply (values redacted):\n%s", redactedState(t, secret))
	list, err := e.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "tfstate=true,tfstateSecretSuffix=" + suffix})
	require.NoError(t, err)
	assert.Len(t, list.Items, 1, "a small state is one Secret")

	printed := w.outputs(t)
	assertOutputs(t, printed, id)
	requireOutputsMatch(t, secret, printed)

	// Destroy from a fresh working copy, as the destroy Job runs: the state
	// comes from the Secret. The next Job's environment has the new key.
	d := newWorkdir(t, vars, tofuEnv(t, bin, tokenB))
	require.NoError(t, os.WriteFile(filepath.Join(d.dir, "captf_override.tf"), []byte(backendOverride), 0o644))
	d.mustRun(t, initArgs...)
	destroyOut := d.mustRun(t, "destroy", "-auto-approve", "-input=false", "-lock-timeout=60s")
	t.Logf("tofu destroy (kubernetes backend):\n%s", destroyOut)
	seen = c.seen(t)
	dels := requestsTo(seen, "DELETE", "/resources/"+id)
	require.Len(t, dels, 1, describe(seen))
	assert.Equal(t, []string{"204", "file", "current"}, []string{itoa(dels[0].Status), dels[0].Source, dels[0].Credential})
	assert.Empty(t, c.resources(t, tokenB))

	// Destroy leaves the Secret (with an empty state) and the Lease: deleting
	// them is the manager's job (T2).
	secret, err = e.Kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	require.NoError(t, err)
	state = decodeState(t, secret.Data["tfstate"])
	assert.Empty(t, state.Outputs)
	assert.Empty(t, state.Resources)
	t.Logf("state Secret after destroy:\n%s", redactedState(t, secret))
	lease, err = e.Kube.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, lease.Spec.HolderIdentity)
}

// grantT1 gives user exactly what SPEC T1's captf-runner ClusterRole grants,
// in namespace ns.
func grantT1(t *testing.T, e *framework.Env, ns, user string) {
	t.Helper()
	ctx := framework.Context(t)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "runner-t1", Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
		},
	}
	_, err := e.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "runner-t1", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	_, err = e.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	// RBAC is read from an informer: wait until the grant is in force.
	as, err := kubernetes.NewForConfig(e.As(user))
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := as.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			return
		}
		require.True(t, apierrors.IsForbidden(err), "%v", err)
		require.True(t, time.Now().Before(deadline), "RBAC grant not in force: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
}

// tfstate is the part of a state file the tests look at.
type tfstate struct {
	Version          int                        `json:"version"`
	TerraformVersion string                     `json:"terraform_version"`
	Serial           int                        `json:"serial"`
	Lineage          string                     `json:"lineage"`
	Outputs          map[string]json.RawMessage `json:"outputs"`
	Resources        []json.RawMessage          `json:"resources"`
}

func decodeState(t *testing.T, gz []byte) tfstate {
	t.Helper()
	raw := gunzip(t, gz)
	var s tfstate
	require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
	return s
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

// redactedState renders the state Secret with its data replaced by a size
// note, followed by the decompressed state with sensitive output values
// replaced.
func redactedState(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	c := s.DeepCopy()
	c.ManagedFields = nil
	raw := gunzip(t, c.Data["tfstate"])
	c.Data = nil
	c.StringData = map[string]string{"tfstate": "<redacted: " + itoa(len(s.Data["tfstate"])) + " bytes of gzip, " + itoa(len(raw)) + " bytes of JSON>"}
	var state map[string]any
	require.NoError(t, json.Unmarshal(raw, &state))
	if outs, ok := state["outputs"].(map[string]any); ok {
		for _, o := range outs {
			if m, ok := o.(map[string]any); ok && m["sensitive"] == true {
				m["value"] = "<redacted>"
			}
		}
	}
	pretty, err := json.MarshalIndent(state, "", "  ")
	require.NoError(t, err)
	return toYAML(t, c) + "--- decompressed tfstate:\n" + string(pretty)
}

func toYAML(t *testing.T, obj any) string {
	t.Helper()
	b, err := yaml.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

// requireOutputsMatch is T4 against a real state: what pkg/tfstate reads
// from the state Secret OpenTofu wrote equals what `tofu output -json`
// printed, value for value, except that sensitive outputs are named and
// their values appear nowhere in what the manager would publish (X1).
func requireOutputsMatch(t *testing.T, secret *corev1.Secret, printed outputs) {
	t.Helper()
	read, err := statefile.Read(statefile.Chunks(secret.Labels[statefile.LabelSuffix], func(name string) (*corev1.Secret, error) {
		if name == secret.Name {
			return secret, nil
		}
		return nil, nil
	}))
	require.NoError(t, err)
	published, err := read.Encode()
	require.NoError(t, err)
	var sensitive []string
	for name, o := range printed {
		if o.Sensitive {
			sensitive = append(sensitive, name)
			var v string
			require.NoError(t, json.Unmarshal(o.Value, &v))
			require.NotEmpty(t, v)
			assert.NotContains(t, string(published), v, "X1: the value of sensitive output %s", name)
			continue
		}
		require.Contains(t, read.Values, name)
		assert.JSONEq(t, string(o.Value), string(read.Values[name]), "output %s", name)
	}
	sort.Strings(sensitive)
	assert.Equal(t, sensitive, read.Sensitive)
	assert.Len(t, read.Values, len(printed)-len(sensitive))
	t.Logf("T4: outputs as the manager publishes them: %s; sensitive: %v", published, read.Sensitive)
}
