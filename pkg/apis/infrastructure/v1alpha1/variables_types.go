package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// VariablesOf returns the spec.variables (SPEC T3) of a TerraformCluster,
// TerraformMachine or TerraformMachinePool as JSON, nil when unset or for
// any other object. The slice is the object's: do not modify it.
func VariablesOf(obj runtime.Object) []byte {
	var v *runtime.RawExtension
	switch o := obj.(type) {
	case *TerraformCluster:
		v = o.Spec.Variables
	case *TerraformMachine:
		v = o.Spec.Variables
	case *TerraformMachinePool:
		v = o.Spec.Variables
	}
	if v == nil {
		return nil
	}
	return v.Raw
}

// VariablesFormat says how a variables source's values are read (SPEC O9).
// +kubebuilder:validation:Enum=String;JSON
type VariablesFormat string

const (
	// VariablesFormatString: each value is a string variable (the default).
	VariablesFormatString VariablesFormat = "String"
	// VariablesFormatJSON: each value is JSON, any type the module
	// declares.
	VariablesFormatJSON VariablesFormat = "JSON"
)

// LocalObjectReference names an object in the referrer's namespace.
type LocalObjectReference struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// VariablesFromSource is one source of input variables (SPEC O9): a
// ConfigMap or a Secret of the object's namespace labelled
// captf.io/variables=true.
// +kubebuilder:validation:XValidation:rule="has(self.configMapRef) != has(self.secretRef)",message="exactly one of configMapRef and secretRef (O9)"
type VariablesFromSource struct {
	// ConfigMapRef names a ConfigMap.
	// +optional
	ConfigMapRef *LocalObjectReference `json:"configMapRef,omitempty"`
	// SecretRef names a Secret; its values are sensitive.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// Optional: a missing source contributes nothing instead of holding
	// the apply back.
	// +optional
	Optional bool `json:"optional,omitempty"`
	// Format of the values: String (unset) or JSON.
	// +optional
	Format VariablesFormat `json:"format,omitempty"`
}

// VariablesFromOf returns the spec.variablesFrom (SPEC O9) of a
// TerraformCluster, TerraformMachine or TerraformMachinePool, nil for any
// other object. The slice is the object's: do not modify it.
func VariablesFromOf(obj runtime.Object) []VariablesFromSource {
	switch o := obj.(type) {
	case *TerraformCluster:
		return o.Spec.VariablesFrom
	case *TerraformMachine:
		return o.Spec.VariablesFrom
	case *TerraformMachinePool:
		return o.Spec.VariablesFrom
	}
	return nil
}
