package tofu

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/runner"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// bootstrapSecret is the machine's bootstrap data in the contract inputs
// test: a marker that must never appear in any output, raw or base64.
const bootstrapSecret = "#cloud-config\nruncmd:\n  - echo k6-bootstrap-marker-5b0e93c1 join-token abcdef.0123456789abcdef\n"

// machineInputs renders, with pkg/contract as the controller does, the
// contract inputs of a TerraformMachine owned by a control plane Machine
// of a Cluster whose TerraformCluster exported a VPC (SPEC K6).
func machineInputs(t *testing.T, ns string) contract.Inputs {
	t.Helper()
	c := &capiv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k6-cluster"}}
	m := &capiv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k6-cluster-cp-x7k2p", Labels: map[string]string{capiv1.LabelControlPlane: ""}},
		Spec:       capiv1.MachineSpec{ClusterName: c.Name, Version: "v1.37.2", FailureDomain: "fd-b"},
	}
	obj := &metav1.ObjectMeta{Namespace: ns, Name: "k6-cluster-cp-q9w4z", UID: types.UID("0b8e2a4c-4a51-4d4e-9d7e-6f1f3c2d9a10"),
		Annotations: map[string]string{capiv1.AnnotationClonedFromName: "k6-cp-template"}}
	in := contract.RenderInputs(contract.InputSources{
		Kind:      v1alpha1.KindTerraformMachine,
		Object:    obj,
		Owners:    contract.Owners{Cluster: c, Machine: m},
		Exports:   json.RawMessage(`{"vpc_id":"vpc-0k6","subnet_ids":["subnet-a","subnet-b"],"security_group":{"id":"sg-1","rules":2}}`),
		Bootstrap: &contract.BootstrapData{Value: []byte(bootstrapSecret), Format: "cloud-config"},
	})
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range in {
			if !yield(k) {
				return
			}
		}
	})
	require.Equal(t, []string{
		contract.InputBootstrapData, contract.InputBootstrapFormat, contract.InputCluster, contract.InputClusterOutputs,
		contract.InputObject, contract.InputTags, contract.InputControlPlane, contract.InputFailureDomain,
		contract.InputKubernetes, contract.InputMachineName,
	}, names, "the machine role's full set of inputs")
	return in
}

// SPEC K6 with both binaries, OpenTofu's (bin/tofu) and HashiCorp
// Terraform's (bin/terraform), through the real runner and the kubernetes
// backend on a real kube-apiserver: with --inputs holding a machine's full
// set of contract inputs and CAPTF_VARIABLES holding spec.variables,
//   - a module that declares none of the inputs applies and destroys (the
//     values of undeclared variables in a variables file are a warning,
//     never an error);
//   - a module that declares some receives their values, bootstrap_data
//     (declared sensitive) intact, and bootstrap_data never appears in the
//     runner's or Terraform's output, raw or base64.
//
// The contrast that makes the file the right channel: the same undeclared
// name given as -var on the command line is an error for both.
func TestContractInputsK6(t *testing.T) {
	for _, b := range []struct{ name, binary, missing string }{
		{"tofu", tofuBinary, "bin/tofu is missing: build it with `make tofu`"},
		{"terraform", terraformBinary, "bin/terraform is missing: build it with `make terraform`"},
	} {
		t.Run(b.name, func(t *testing.T) {
			if b.binary == "" {
				t.Skip(b.missing)
			}
			testContractInputs(t, b.binary)
		})
	}
}

func testContractInputs(t *testing.T, binary string) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "contract", nil)
	grantT1(t, e, ns, controlplane.Alice)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, e.CP.WriteKubeconfig(kubeconfig, controlplane.Alice))

	in := machineInputs(t, ns)
	inputsFile := filepath.Join(t.TempDir(), "inputs.json")
	require.NoError(t, os.WriteFile(inputsFile, in.JSON(), 0o600))
	encoded := base64.StdEncoding.EncodeToString([]byte(bootstrapSecret))
	require.JSONEq(t, `"`+encoded+`"`, string(in[contract.InputBootstrapData]))
	secretNeedles := []string{encoded, "k6-bootstrap-marker-5b0e93c1", "abcdef.0123456789abcdef"}

	vars, err := json.Marshal(map[string]any{"greeting": "hello from spec.variables"})
	require.NoError(t, err)
	env := append(tofuEnv(t, t.TempDir(), ""),
		runner.VariablesEnv+"="+string(vars),
		// Terraform's update check would call out to the network.
		"CHECKPOINT_DISABLE=1")

	run := func(module, command, suffix string) string {
		t.Helper()
		code, out := runnerRunWith(t, binary, filepath.Join(root, "test", "tofu", "testdata", module), env,
			command, "--inputs="+inputsFile,
			"--state-namespace="+ns, "--state-suffix="+suffix, "--state-kubeconfig="+kubeconfig)
		require.Equal(t, 0, code, "%s of %s with undeclared contract inputs", command, module)
		assert.Equal(t, "captf runner: init succeeded, "+command+" succeeded", lastLine(out))
		assert.Contains(t, out, "captf runner: wrote 10 contract inputs to "+runner.InputsFile)
		for _, s := range secretNeedles {
			assert.NotContains(t, out, s, "X1: bootstrap data in the output of %s of %s", command, module)
		}
		return out
	}
	state := func(suffix string) tfstate {
		t.Helper()
		secret, err := e.Kube.CoreV1().Secrets(ns).Get(ctx, "tfstate-default-"+suffix, metav1.GetOptions{})
		require.NoError(t, err)
		return decodeState(t, secret.Data["tfstate"])
	}
	output := func(s tfstate, name string) string {
		t.Helper()
		require.Contains(t, s.Outputs, name)
		var o struct {
			Value json.RawMessage `json:"value"`
		}
		require.NoError(t, json.Unmarshal(s.Outputs[name], &o))
		return string(o.Value)
	}

	t.Run("declares none", func(t *testing.T) {
		out := oneLine(run("contract-none", "apply", "none"))
		// Terraform and OpenTofu name at most two undeclared values of a
		// file and count the rest (docs/runtime-environment.md quotes it).
		assert.Contains(t, out, "Warning: Value for undeclared variable")
		assert.Contains(t, out, `but a value was found in file "`+runner.InputsFile+`"`)
		assert.Contains(t, out, "Warning: Values for undeclared variables")
		assert.Contains(t, out, "8 other variable(s) defined without being declared")
		s := state("none")
		assert.JSONEq(t, `"hello from spec.variables"`, output(s, "greeting"))
		assert.Len(t, s.Resources, 1)

		run("contract-none", "destroy", "none")
		assert.Empty(t, state("none").Resources)
	})

	t.Run("declares some", func(t *testing.T) {
		out := oneLine(run("contract-some", "apply", "some"))
		// Four of the ten stay undeclared: two named, two counted.
		assert.Contains(t, out, "Warning: Value for undeclared variable")
		assert.Contains(t, out, "2 other variable(s) defined without being declared")
		assert.Contains(t, out, "(sensitive value)", "the plan hides bootstrap_data")
		s := state("some")
		assert.JSONEq(t, `"k6-cluster-cp-x7k2p"`, output(s, "machine_name"), "machine_name is the Machine's name")
		assert.JSONEq(t, `true`, output(s, "control_plane"))
		assert.JSONEq(t, `"k6-cluster"`, output(s, "cluster_tag"))
		assert.JSONEq(t, `"vpc-0k6"`, output(s, "vpc_id"))
		// The module decoded nothing: it received the base64 text intact.
		sum := sha256.Sum256([]byte(encoded))
		assert.JSONEq(t, `"`+hex.EncodeToString(sum[:])+`"`, output(s, "bootstrap_data_sha256"))

		run("contract-some", "destroy", "some")
		assert.Empty(t, state("some").Resources)
	})

	t.Run("-var is no way to pass them", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "module")
		require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(root, "test", "tofu", "testdata", "contract-none"))))
		cli := func(args ...string) (string, int) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, args...)
			cmd.Dir = dir
			cmd.Env = env
			b, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); ok {
				return string(b), ee.ExitCode()
			}
			require.NoError(t, err)
			return string(b), 0
		}
		out, code := cli("init", "-input=false", "-no-color")
		require.Equal(t, 0, code, out)
		out, code = cli("plan", "-input=false", "-no-color", "-var", "greeting=hi", "-var", "machine_name=m1")
		t.Logf("%s plan -var machine_name=m1 (exit %d):\n%s", filepath.Base(binary), code, out)
		assert.Equal(t, 1, code, "an undeclared -var is an error")
		assert.Contains(t, out, "Error: Value for undeclared variable")
	})
}

// oneLine joins s's words with single spaces: Terraform wraps diagnostics
// at its terminal width (78 columns when the output is not a terminal).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// TestSecretVariableKeptOutOfTheLogO9 proves O9 with OpenTofu on a real
// kube-apiserver: a variable a Secret gave, which the module does not
// declare sensitive, is in the plan OpenTofu prints; the runner's output
// (the pod's log) shows "(sensitive)" in its place, and a value no Secret
// gave as it is, while the module still gets the value.
func TestSecretVariableKeptOutOfTheLogO9(t *testing.T) {
	if tofuBinary == "" {
		t.Skip("bin/tofu is missing: build it with `make tofu`")
	}
	const password = "o9-db-pass-7f3a91"
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "o9", nil)
	grantT1(t, e, ns, controlplane.Alice)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, e.CP.WriteKubeconfig(kubeconfig, controlplane.Alice))

	in := contract.Inputs{"db_password": json.RawMessage(`"` + password + `"`), "region": json.RawMessage(`"o9-region-east"`)}
	in.MarkSensitive([]string{"db_password"})
	inputsFile := filepath.Join(t.TempDir(), "inputs.json")
	require.NoError(t, os.WriteFile(inputsFile, in.JSON(), 0o600))
	env := append(tofuEnv(t, t.TempDir(), ""), "CHECKPOINT_DISABLE=1")

	code, out := runnerRunWith(t, tofuBinary, filepath.Join(root, "test", "tofu", "testdata", "secret-variable"), env,
		"apply", "--inputs="+inputsFile, "--state-namespace="+ns, "--state-suffix=o9", "--state-kubeconfig="+kubeconfig)
	require.Equal(t, 0, code, out)
	assert.NotContains(t, out, password, "X1: the Secret's value in the pod's log")
	assert.Contains(t, oneLine(out), `password = "(sensitive)"`, "the plan line, redacted")
	assert.Contains(t, out, `"o9-region-east"`, "a value no Secret gave is shown")
	assert.NotContains(t, out, "captf_sensitive_inputs", "the mark is no variable of the module's")

	secret, err := e.Kube.CoreV1().Secrets(ns).Get(ctx, "tfstate-default-o9", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, string(gunzip(t, secret.Data["tfstate"])), password, "the module got the value")
}
