package tofu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/runner"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// runnerRun is one `captf runner` run, in process, as a Job runs it: a new
// empty working directory and HOME each time, the module directory of the
// image (here the repository's test/e2e/module) only read.
func runnerRun(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	return runnerRunWith(t, tofuBinary, filepath.Join(root, "test", "e2e", "module"), env, args...)
}

// runnerRunWith is runnerRun with another Terraform binary and module.
func runnerRunWith(t *testing.T, binary, module string, env []string, args ...string) (int, string) {
	t.Helper()
	args = append(args, "--terraform="+binary,
		"--chdir="+module,
		"--workdir="+t.TempDir(),
		"--home="+filepath.Join(t.TempDir(), "home"))
	var out bytes.Buffer
	code := runner.Main(context.Background(), args, env, &out, &out)
	t.Logf("captf runner %s (exit %d):\n%s", strings.Join(args, " "), code, out.String())
	return code, out.String()
}

// treeHash hashes a directory tree's paths, modes, file contents and
// symlink targets.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h.Write([]byte(rel + "\x00" + info.Mode().String() + "\x00"))
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(path)
			if err != nil {
				return err
			}
			h.Write([]byte(l))
		case info.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		h.Write([]byte{0})
		return nil
	}))
	return hex.EncodeToString(h.Sum(nil))
}

// The runner itself (SPEC T2, T3, T8) with OpenTofu against a real
// kube-apiserver, as a user holding only T1's verbs: `captf runner apply`
// with a working copy, the kubernetes backend (out of cluster through
// --state-kubeconfig) and CAPTF_VARIABLES creates the resource and writes
// tfstate-default-<suffix>; a second apply from a new empty working copy
// finds that state and changes nothing; destroy from another new working
// copy deletes what apply created. The module directory is never written.
func TestRunnerKubernetesBackend(t *testing.T) {
	requireTofu(t)
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "runner", nil)
	grantT1(t, e, ns, controlplane.Alice)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, e.CP.WriteKubeconfig(kubeconfig, controlplane.Alice))

	bin := buildFakecloud(t)
	c := startCloud(t, bin, tokenA)
	const suffix = "demo-cluster"
	secretName, leaseName := "tfstate-default-"+suffix, "lock-tfstate-default-"+suffix
	id := moduleID(ns, "demo")
	vars, err := json.Marshal(map[string]any{
		"name":               "demo",
		"namespace":          ns,
		"fakecloud_endpoint": c.url,
		"credential_file":    c.credentialFile,
	})
	require.NoError(t, err)
	env := append(tofuEnv(t, bin, tokenA),
		runner.VariablesEnv+"="+string(vars),
		// J6 drops these; if the runner relied on them instead of init's
		// flags, the backend would look in the wrong place.
		"KUBE_NAMESPACE=default",
		"KUBE_CONFIG_PATH=/nonexistent/kubeconfig",
		"TF_VAR_name=from-the-environment",
	)
	state := []string{"--state-namespace=" + ns, "--state-suffix=" + suffix, "--state-kubeconfig=" + kubeconfig}
	module := filepath.Join(root, "test", "e2e", "module")
	before := treeHash(t, module)

	// T8: before any state exists, init writes the first, empty state and
	// takes the lock to do so. OpenTofu's backend takes that lock once,
	// without retrying (backend_state.go StateMgr), whatever -lock-timeout
	// says: with the lock held by another run, init fails at once ("Error
	// loading state"), and apply does not run.
	holder := "other-run-lock-id"
	lockInfo := map[string]string{"app.terraform.io/lock-info": `{"ID":"other-run-lock-id","Operation":"OperationTypeApply","Who":"test"}`}
	held, err := e.Kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Annotations: lockInfo, Labels: map[string]string{
			"tfstate": "true", "tfstateSecretSuffix": suffix, "tfstateWorkspace": "default", "app.kubernetes.io/managed-by": "terraform"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	code, out := runnerRun(t, env, append([]string{"apply", "--lock-timeout=1s"}, state...)...)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, out, "Error loading state")
	assert.Contains(t, out, "the state is already locked")
	assert.Contains(t, out, "ID:        "+holder)
	assert.Equal(t, "captf runner: init failed with exit code 1, apply not run", lastLine(out))
	assert.Empty(t, requestsTo(c.seen(t), "PUT", "/resources/"+id))
	release(t, e, ns, held)

	code, out = runnerRun(t, env, append([]string{"apply", "--lock-timeout=60s"}, state...)...)
	require.Equal(t, 0, code)
	assert.Equal(t, "captf runner: init succeeded, apply succeeded", lastLine(out))
	assert.NotContains(t, out, "\x1b[", "-no-color: no ANSI escapes in the log")
	assert.NotContains(t, out, tokenA)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "captf runner: ") {
			assert.NotContains(t, l, c.url, "the runner logs variable names, not values")
		}
	}
	assert.Contains(t, out, "captf runner: removed environment variables (SPEC J6, B7): KUBE_CONFIG_PATH TF_VAR_name\n")
	assert.Contains(t, out, "(SPEC T3): credential_file fakecloud_endpoint name namespace\n")
	res := c.resources(t, tokenA)
	require.Len(t, res, 1)
	assert.Equal(t, id, res[0].ID)
	assert.Equal(t, "demo", res[0].Name, "the name comes from CAPTF_VARIABLES, not TF_VAR_name")
	secret, err := e.Kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, suffix, secret.Labels["tfstateSecretSuffix"])
	st := decodeState(t, secret.Data["tfstate"])
	assert.JSONEq(t, `{"value":"`+id+`","type":"string"}`, string(st.Outputs["resource_id"]))
	assert.Len(t, st.Resources, 1)
	_, err = e.Kube.CoreV1().Secrets("default").Get(ctx, secretName, metav1.GetOptions{})
	assert.Error(t, err, "no state in KUBE_NAMESPACE's namespace")

	code, out = runnerRun(t, env, append([]string{"apply"}, state...)...)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "0 added, 0 changed, 0 destroyed", "a new working copy finds the state")
	assert.Len(t, requestsTo(c.seen(t), "PUT", "/resources/"+id), 1, "the second apply created nothing")

	// T8: with the lock held by another run, destroy waits --lock-timeout
	// for it, then fails without touching anything. (init takes the lock
	// only when it must write the first, empty state: here the state
	// exists, so init does not wait.)
	lease, err := e.Kube.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	held = lease.DeepCopy()
	held.Spec.HolderIdentity = &holder
	held.Annotations = lockInfo
	held, err = e.Kube.CoordinationV1().Leases(ns).Update(ctx, held, metav1.UpdateOptions{})
	require.NoError(t, err)
	code, out = runnerRun(t, env, append([]string{"destroy", "--lock-timeout=2s"}, state...)...)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, out, "Error acquiring the state lock")
	assert.Contains(t, out, "ID:        "+holder)
	assert.Equal(t, "captf runner: init succeeded, destroy failed with exit code 1", lastLine(out))
	assert.Empty(t, requestsTo(c.seen(t), "DELETE", "/resources/"+id), "a locked-out destroy destroys nothing")
	release(t, e, ns, held)

	code, out = runnerRun(t, env, append([]string{"destroy"}, state...)...)
	require.Equal(t, 0, code)
	assert.Equal(t, "captf runner: init succeeded, destroy succeeded", lastLine(out))
	seen := c.seen(t)
	dels := requestsTo(seen, "DELETE", "/resources/"+id)
	require.Len(t, dels, 1, describe(seen))
	assert.Equal(t, 204, dels[0].Status)
	assert.Empty(t, c.resources(t, tokenA))
	secret, err = e.Kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, decodeState(t, secret.Data["tfstate"]).Resources)

	assert.Equal(t, before, treeHash(t, module), "the module directory was modified")
}

// release frees a lock Lease the test took.
func release(t *testing.T, e *framework.Env, ns string, l *coordinationv1.Lease) {
	t.Helper()
	free := l.DeepCopy()
	free.Spec.HolderIdentity = nil
	free.Annotations = nil
	_, err := e.Kube.CoordinationV1().Leases(ns).Update(framework.Context(t), free, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
