package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/runresult"
)

const (
	// VariablesEnv is the environment variable that carries spec.variables
	// from the Job to the runner (SPEC T3). It is removed from Terraform's
	// environment.
	VariablesEnv = "CAPTF_VARIABLES"

	// VariablesFile is the variables file the runner writes into the
	// working copy; Terraform loads *.auto.tfvars.json by itself.
	VariablesFile = "captf.auto.tfvars.json"

	// InputsFile is the variables file of the contract inputs (SPEC K6),
	// beside VariablesFile; their names never overlap (spec.variables may
	// not use the inputs' names). Terraform and OpenTofu warn about values
	// of variables the module does not declare, and ignore them.
	InputsFile = "captf-contract.auto.tfvars.json"

	// MaxInputsBytes bounds the inputs file the runner reads (the run
	// Secret holding it is at most 1 MiB).
	MaxInputsBytes = 1 << 20

	// BackendOverrideFile replaces any backend (or cloud block) the module
	// declares with the kubernetes backend (SPEC T2). Terraform merges
	// *_override.tf files over the module's configuration.
	BackendOverrideFile = "captf_backend_override.tf"

	backendOverride = "# Written by captf runner (SPEC T2): the state lives in the object's namespace.\n" +
		"terraform {\n  backend \"kubernetes\" {}\n}\n"
)

// parseVariables checks that value is a JSON object and returns it as the
// content of the variables file, with its key names sorted. Errors never
// quote the value: only its JSON type, a byte offset or key names (the
// variables are not secret, T3, but a log has no use for them).
func parseVariables(value string) ([]byte, []string, error) {
	trimmed := bytes.TrimSpace([]byte(value))
	if len(trimmed) == 0 {
		return nil, nil, fmt.Errorf("%s is empty; it must be a JSON object of input variables", VariablesEnv)
	}
	var vars map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &vars); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return nil, nil, fmt.Errorf("%s is not valid JSON (syntax error at byte %d of %d); it must be a JSON object of input variables", VariablesEnv, syntax.Offset, len(value))
		case errors.As(err, &typ):
			return nil, nil, fmt.Errorf("%s is a JSON %s; it must be a JSON object of input variables", VariablesEnv, typ.Value)
		default:
			return nil, nil, fmt.Errorf("%s is not a JSON object of input variables", VariablesEnv)
		}
	}
	if vars == nil { // null
		return nil, nil, fmt.Errorf("%s is JSON null; it must be a JSON object of input variables", VariablesEnv)
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	slices.Sort(names)
	// Marshalled again, not copied: one value per key (a duplicate key in the
	// variable keeps its last value, as encoding/json reads it), keys sorted.
	b, err := json.MarshalIndent(vars, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", VariablesEnv, err)
	}
	return append(b, '\n'), names, nil
}

// readInputs reads the contract inputs file (SPEC K6): a JSON object of
// at most MaxInputsBytes, returned as the variables file's content with
// its key names sorted, without contract.InputSensitive, whose names'
// values (and the bootstrap data's) the returned Redactor holds for
// Terraform's output (O9, K5; nil when there are none). Errors never quote
// it: its values may be sensitive (K5, O9, X1).
func readInputs(path string) ([]byte, []string, *runresult.Redactor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--inputs: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxInputsBytes+1))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--inputs: reading %s: %v", path, err)
	}
	if len(b) > MaxInputsBytes {
		return nil, nil, nil, fmt.Errorf("--inputs: %s is more than %d bytes", path, MaxInputsBytes)
	}
	var in contract.Inputs
	if err := json.Unmarshal(b, &in); err != nil || in == nil {
		return nil, nil, nil, fmt.Errorf("--inputs: %s is not a JSON object of inputs", path)
	}
	logs := sensitiveInputs(in)
	delete(in, contract.InputSensitive) // no variable of the module's
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	slices.Sort(names)
	out, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--inputs: %s: not valid JSON", path)
	}
	return append(out, '\n'), names, logs, nil
}

// numericTail is what Terraform's kubernetes backend refuses at the end of
// secret_suffix: it would be taken for the index of a split state's part.
var numericTail = regexp.MustCompile(`-[0-9]+$`)

// checkState validates --state-namespace and --state-suffix the way the
// API server and Terraform would, so a bad value is a clear runner error
// (exit 125) rather than a failure in the middle of `terraform init`.
func checkState(namespace, suffix string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("--state-namespace %q is not a namespace name: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(suffix); len(errs) > 0 || suffix == "" {
		if suffix == "" {
			errs = []string{"must not be empty"}
		}
		return fmt.Errorf("--state-suffix %q is not a valid label value (the state Secret carries it as the label tfstateSecretSuffix): %s", suffix, strings.Join(errs, "; "))
	}
	for _, name := range []string{"tfstate-default-" + suffix, "lock-tfstate-default-" + suffix} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("--state-suffix %q gives the object name %q, which is not a DNS-1123 subdomain: %s", suffix, name, strings.Join(errs, "; "))
		}
	}
	if numericTail.MatchString(suffix) {
		return fmt.Errorf("--state-suffix %q ends with '-<number>', which Terraform's kubernetes backend refuses; put a non-numeric segment last (SPEC T2: <name>-<kind>)", suffix)
	}
	return nil
}

// initArgs is `terraform init` with the backend configuration of SPEC T2
// when the state flags are given. All settings go on the command line:
// J6 removes the KUBE_* variables the backend would otherwise read.
func (c config) initArgs() []string {
	args := []string{"init", "-input=false", "-no-color", c.lockTimeoutArg()}
	if c.stateNamespace == "" {
		return args
	}
	args = append(args, "-reconfigure",
		"-backend-config=secret_suffix="+c.stateSuffix,
		"-backend-config=namespace="+c.stateNamespace,
	)
	if c.stateKubeconfig != "" {
		return append(args, "-backend-config=config_path="+c.stateKubeconfig, "-backend-config=in_cluster_config=false")
	}
	return append(args, "-backend-config=in_cluster_config=true")
}

// commandArgs is `terraform apply` or `terraform destroy`.
func (c config) commandArgs() []string {
	return []string{c.command, "-auto-approve", "-input=false", "-no-color", c.lockTimeoutArg()}
}

// lockTimeoutArg is SPEC T8's lock wait, in whole seconds as Terraform
// prints it.
func (c config) lockTimeoutArg() string {
	return fmt.Sprintf("-lock-timeout=%ds", int64(c.lockTimeout.Seconds()))
}
