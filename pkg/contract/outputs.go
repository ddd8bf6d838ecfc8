package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// The contract outputs (SPEC T5, K7; upstream A3-28..A3-36).
const (
	OutputControlPlaneEndpoint = "control_plane_endpoint"
	OutputFailureDomains       = "failure_domains"
	OutputExports              = "exports"
	OutputProviderID           = "provider_id"
	OutputAddresses            = "addresses"
	OutputFailureDomain        = "failure_domain"
	OutputInterruptible        = "interruptible"
	OutputProviderIDList       = "provider_id_list"
	OutputReplicas             = "replicas"
	OutputHealth               = "health"
)

// Bounds the CRDs enforce on the fields, checked here first so a bad
// output is reported, not refused by the API server on every pass.
const (
	MaxFieldLength    = 512
	MaxProviderIDList = 10000
	MaxExportsBytes   = 64 << 10
	maxFailureDomains = 100
	maxAddresses      = 256
	maxHealthMessage  = 256
)

// Condition is a condition to set: status, reason and message.
type Condition struct {
	Status  metav1.ConditionStatus
	Reason  v1alpha1.ConditionReason
	Message string
}

// Outputs is what the contract outputs of one object say (SPEC K7):
// the fields to write, and OutputsValid and InfrastructureHealthy.
type Outputs struct {
	// Valid is the OutputsValid condition.
	Valid Condition
	// Health is the InfrastructureHealthy condition.
	Health Condition

	// Endpoint (cluster), ProviderID (machine) and ProviderIDList (pool)
	// are the spec fields Cluster API reads; zero when the output is
	// missing, null or invalid.
	Endpoint       v1alpha1.APIEndpoint
	ProviderID     string
	ProviderIDList []string
	// HasProviderIDList says whether ProviderIDList is valid (it may be
	// empty: a pool scaled to zero).
	HasProviderIDList bool

	// Status fields.
	FailureDomains []v1alpha1.FailureDomain
	Exports        json.RawMessage
	Addresses      []v1alpha1.MachineAddress
	FailureDomain  string
	Interruptible  bool
	Replicas       *int32
}

// OutputsContext is what mapping the outputs needs beyond them.
type OutputsContext struct {
	// Kind of the object.
	Kind string
	// MachineFailureDomain is the Machine's spec.failureDomain ("" when
	// unset or not known).
	MachineFailureDomain string
	// ProviderID is the machine's spec.providerID as stored ("" unset).
	ProviderID string
	// EndpointSet says the cluster's spec.controlPlaneEndpoint is already
	// set (by hand, or by an earlier output), so the output is optional.
	EndpointSet bool
	// TooLarge names the outputs whose value was over its bound in the
	// state (StateBounds): invalid, not missing.
	TooLarge []string
}

// problems collects what is wrong, by reason, first reason wins.
type problems struct {
	reason v1alpha1.ConditionReason
	msgs   []string
}

func (p *problems) add(reason v1alpha1.ConditionReason, format string, args ...any) {
	if p.reason == "" {
		p.reason = reason
	}
	p.msgs = append(p.msgs, fmt.Sprintf(format, args...))
}

// MapOutputs maps the published outputs (status.outputs: non-sensitive
// only, T4) to the contract's fields and conditions (SPEC K7, K8). An
// output that is null is pending, one that is absent is missing; only the
// outputs each role needs are required (a cluster's endpoint unless it is
// already set, a machine's provider_id, a pool's provider_id_list).
func MapOutputs(ctx OutputsContext, values map[string]json.RawMessage) Outputs {
	m := &mapper{values: values, tooLarge: map[string]bool{}, kind: ctx.Kind}
	for _, name := range ctx.TooLarge {
		m.tooLarge[name] = true
	}
	switch ctx.Kind {
	case v1alpha1.KindTerraformCluster:
		m.cluster(ctx)
	case v1alpha1.KindTerraformMachine:
		m.machine(ctx)
	case v1alpha1.KindTerraformMachinePool:
		m.pool()
	}
	out := m.out
	if m.p.reason == "" {
		out.Valid = Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonOutputsValid, Message: "the contract outputs are valid"}
	} else {
		out.Valid = Condition{Status: metav1.ConditionFalse, Reason: m.p.reason, Message: strings.Join(m.p.msgs, "; ")}
	}
	out.Health = health(values)
	if m.tooLarge[OutputHealth] {
		out.Health = Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonHealthUnknown, Message: tooLargeMessage(ctx.Kind, OutputHealth)}
	}
	return out
}

// mapper maps the outputs of one object into out, noting the problems.
type mapper struct {
	values   map[string]json.RawMessage
	tooLarge map[string]bool
	kind     string
	out      Outputs
	p        problems
}

// tooLargeMessage says that output name of kind's role was over its bound.
func tooLargeMessage(kind, name string) string {
	return fmt.Sprintf("output %s is over %d bytes as JSON in the state, its bound", name, StateBounds(kind)[name])
}

// required parses output name, which must be there and not null.
func (m *mapper) required(name string, parse func(json.RawMessage) error) {
	raw, ok := m.values[name]
	switch {
	case m.tooLarge[name]:
		m.p.add(v1alpha1.ReasonOutputsInvalid, "%s", tooLargeMessage(m.kind, name))
	case !ok:
		m.p.add(v1alpha1.ReasonOutputsMissing, "output %s is missing (a sensitive output is not published: declare it sensitive = false)", name)
	case isNull(raw):
		m.p.add(v1alpha1.ReasonOutputsPending, "output %s is null (pending)", name)
	default:
		if err := parse(raw); err != nil {
			m.p.add(v1alpha1.ReasonOutputsInvalid, "%v", err)
		}
	}
}

// optional parses output name when it is there and not null.
func (m *mapper) optional(name string, parse func(json.RawMessage) error) {
	raw, ok := m.values[name]
	if m.tooLarge[name] {
		m.p.add(v1alpha1.ReasonOutputsInvalid, "%s", tooLargeMessage(m.kind, name))
		return
	}
	if !ok || isNull(raw) {
		return
	}
	if err := parse(raw); err != nil {
		m.p.add(v1alpha1.ReasonOutputsInvalid, "%v", err)
	}
}

// cluster maps a TerraformCluster's outputs: its endpoint (required until
// the spec sets one), failure domains and exports.
func (m *mapper) cluster(ctx OutputsContext) {
	out := &m.out
	parseEP := func(raw json.RawMessage) (err error) { out.Endpoint, err = ParseEndpoint(raw); return err }
	if ctx.EndpointSet {
		m.optional(OutputControlPlaneEndpoint, parseEP)
	} else {
		m.required(OutputControlPlaneEndpoint, parseEP)
	}
	m.optional(OutputFailureDomains, func(raw json.RawMessage) (err error) { out.FailureDomains, err = parseFailureDomains(raw); return err })
	out.Exports = json.RawMessage(`{}`)
	m.optional(OutputExports, func(raw json.RawMessage) error {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return fmt.Errorf("output %s is not valid JSON", OutputExports)
		}
		if b.Len() > MaxExportsBytes {
			return fmt.Errorf("output %s is %d bytes as JSON, more than %d", OutputExports, b.Len(), MaxExportsBytes)
		}
		if b.Bytes()[0] != '{' {
			return fmt.Errorf("output %s must be an object", OutputExports)
		}
		out.Exports = b.Bytes()
		return nil
	})
}

// machine maps a TerraformMachine's outputs: its provider ID (set once),
// addresses, failure domain (as the Machine's) and interruptible.
func (m *mapper) machine(ctx OutputsContext) {
	out, p := &m.out, &m.p
	m.required(OutputProviderID, func(raw json.RawMessage) (err error) {
		out.ProviderID, err = ParseProviderID(raw)
		if err == nil && ctx.ProviderID != "" && out.ProviderID != ctx.ProviderID {
			p.add(v1alpha1.ReasonProviderIDChanged, "output %s changed from the machine's spec.providerID %s to %s: a machine's provider ID is set once; replace the machine",
				OutputProviderID, truncate(ctx.ProviderID), truncate(out.ProviderID))
		}
		return err
	})
	m.optional(OutputAddresses, func(raw json.RawMessage) (err error) { out.Addresses, err = parseAddresses(raw); return err })
	m.optional(OutputFailureDomain, func(raw json.RawMessage) error {
		fd, err := parseString(OutputFailureDomain, raw, 256)
		if err != nil {
			return err
		}
		if ctx.MachineFailureDomain != "" && fd != ctx.MachineFailureDomain {
			p.add(v1alpha1.ReasonFailureDomainMismatch, "output %s is %q but the Machine's spec.failureDomain is %q",
				OutputFailureDomain, truncate(fd), truncate(ctx.MachineFailureDomain))
			return nil
		}
		out.FailureDomain = fd
		return nil
	})
	m.optional(OutputInterruptible, func(raw json.RawMessage) error {
		if err := json.Unmarshal(raw, &out.Interruptible); err != nil {
			return fmt.Errorf("output %s must be a bool", OutputInterruptible)
		}
		return nil
	})
}

// pool maps a TerraformMachinePool's outputs: its provider ID list and
// replicas.
func (m *mapper) pool() {
	out := &m.out
	m.required(OutputProviderIDList, func(raw json.RawMessage) (err error) {
		out.ProviderIDList, err = ParseProviderIDList(raw)
		out.HasProviderIDList = err == nil
		return err
	})
	m.optional(OutputReplicas, func(raw json.RawMessage) error {
		var n int32
		if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
			return fmt.Errorf("output %s must be a number from 0", OutputReplicas)
		}
		out.Replicas = &n
		return nil
	})
}

// health maps the output health to InfrastructureHealthy (SPEC K7, K8;
// upstream A3-34): an object {state, healthy, message}. Without it the
// infrastructure is healthy once provisioned; a null or unreadable one is
// HealthUnknown.
func health(values map[string]json.RawMessage) Condition {
	raw, ok := values[OutputHealth]
	if !ok {
		return Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonHealthy, Message: "the module has no health output: healthy once provisioned"}
	}
	if isNull(raw) {
		return Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonHealthUnknown, Message: "output health is null"}
	}
	var h struct {
		State   *string `json:"state"`
		Healthy *bool   `json:"healthy"`
		Message string  `json:"message"`
	}
	if err := json.Unmarshal(raw, &h); err != nil || (h.State == nil && h.Healthy == nil) {
		return Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonHealthUnknown,
			Message: "output health must be an object with state (healthy, degraded, pending, provisioning, stopped, terminated, unhealthy) or healthy (a bool)"}
	}
	msg := h.Message
	if len(msg) > maxHealthMessage {
		msg = msg[:maxHealthMessage] + "..."
	}
	with := func(status metav1.ConditionStatus, reason v1alpha1.ConditionReason, def string) Condition {
		if msg == "" {
			msg = def
		}
		return Condition{Status: status, Reason: reason, Message: msg}
	}
	state := ""
	if h.State != nil {
		state = strings.ToLower(*h.State)
	} else if *h.Healthy {
		state = "healthy"
	} else {
		state = "unhealthy"
	}
	switch state {
	case "healthy":
		return with(metav1.ConditionTrue, v1alpha1.ReasonHealthy, "the module reports the infrastructure healthy")
	case "degraded":
		// Still serving: Ready stays True, the reason says it.
		return with(metav1.ConditionTrue, v1alpha1.ReasonInstanceDegraded, "the module reports the infrastructure degraded")
	case "pending":
		return with(metav1.ConditionUnknown, v1alpha1.ReasonInstancePending, "the module reports the infrastructure pending")
	case "provisioning":
		return with(metav1.ConditionUnknown, v1alpha1.ReasonProvisioning, "the module reports the infrastructure provisioning")
	case "stopped":
		return with(metav1.ConditionFalse, v1alpha1.ReasonInstanceStopped, "the module reports the infrastructure stopped")
	case "terminated":
		return with(metav1.ConditionFalse, v1alpha1.ReasonInstanceTerminated, "the module reports the infrastructure terminated")
	case "unhealthy":
		return with(metav1.ConditionFalse, v1alpha1.ReasonInstanceUnhealthy, "the module reports the infrastructure unhealthy")
	}
	return Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonHealthUnknown,
		Message: fmt.Sprintf("output health has an unknown state %q", truncate(state))}
}

// Ready is the Ready condition of a provisioned object (SPEC K8): it
// follows InfrastructureHealthy and deletion, not the run in progress.
func Ready(provisioned, deleting bool, health Condition) (Condition, bool) {
	if !provisioned {
		return Condition{}, false
	}
	if deleting {
		return Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonDeleting, Message: "the object is being deleted"}, true
	}
	if health.Status == metav1.ConditionTrue {
		msg := "provisioned and healthy"
		if health.Reason != v1alpha1.ReasonHealthy {
			msg = "provisioned; " + health.Message
		}
		return Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReady, Message: msg}, true
	}
	return Condition{Status: health.Status, Reason: health.Reason, Message: "InfrastructureHealthy: " + health.Message}, true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }
