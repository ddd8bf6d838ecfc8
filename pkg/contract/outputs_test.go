package contract

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func outs(kv ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return m
}

// SPEC K7: each role's outputs, null = pending, absent = missing.
func TestMapOutputsCluster(t *testing.T) {
	ctx := OutputsContext{Kind: v1alpha1.KindTerraformCluster}
	o := MapOutputs(ctx, outs(
		OutputControlPlaneEndpoint, `{"host":"cp","port":6443}`,
		OutputFailureDomains, `[{"name":"b"},{"name":"a","controlPlane":true,"attributes":{"zone":"a"}}]`,
		OutputExports, `{ "vpc" : "v-1" }`,
	))
	assert.Equal(t, v1alpha1.ReasonOutputsValid, o.Valid.Reason, o.Valid.Message)
	assert.Equal(t, metav1.ConditionTrue, o.Valid.Status)
	assert.Equal(t, v1alpha1.APIEndpoint{Host: "cp", Port: 6443}, o.Endpoint)
	assert.Equal(t, []v1alpha1.FailureDomain{{Name: "a", ControlPlane: ptr.To(true), Attributes: map[string]string{"zone": "a"}}, {Name: "b"}}, o.FailureDomains)
	assert.JSONEq(t, `{"vpc":"v-1"}`, string(o.Exports))
	assert.Equal(t, `{"vpc":"v-1"}`, string(o.Exports), "compact")

	// v1beta1's map shape of failure domains.
	o = MapOutputs(ctx, outs(OutputControlPlaneEndpoint, `"cp:6443"`, OutputFailureDomains, `{"z1":{"controlPlane":false}}`))
	assert.Equal(t, []v1alpha1.FailureDomain{{Name: "z1", ControlPlane: ptr.To(false)}}, o.FailureDomains)
	assert.Equal(t, `{}`, string(o.Exports), "no exports output: {}")

	for _, tt := range []struct {
		name   string
		ctx    OutputsContext
		values map[string]json.RawMessage
		reason v1alpha1.ConditionReason
		msg    string
	}{
		{"endpoint missing", ctx, outs(), v1alpha1.ReasonOutputsMissing, "control_plane_endpoint is missing"},
		{"endpoint pending", ctx, outs(OutputControlPlaneEndpoint, `null`), v1alpha1.ReasonOutputsPending, "null"},
		{"endpoint set by hand", OutputsContext{Kind: v1alpha1.KindTerraformCluster, EndpointSet: true}, outs(), v1alpha1.ReasonOutputsValid, ""},
		{"endpoint invalid", ctx, outs(OutputControlPlaneEndpoint, `"cp"`), v1alpha1.ReasonOutputsInvalid, "not host:port"},
		{"exports too large", ctx, outs(OutputControlPlaneEndpoint, `"cp:1"`, OutputExports, `{"a":"`+strings.Repeat("x", MaxExportsBytes)+`"}`), v1alpha1.ReasonOutputsInvalid, "more than 65536"},
		{"exports not an object", ctx, outs(OutputControlPlaneEndpoint, `"cp:1"`, OutputExports, `[1]`), v1alpha1.ReasonOutputsInvalid, "must be an object"},
		{"failure domains twice", ctx, outs(OutputControlPlaneEndpoint, `"cp:1"`, OutputFailureDomains, `[{"name":"a"},{"name":"a"}]`), v1alpha1.ReasonOutputsInvalid, "twice"},
		{"failure domains bad", ctx, outs(OutputControlPlaneEndpoint, `"cp:1"`, OutputFailureDomains, `"a"`), v1alpha1.ReasonOutputsInvalid, "must be a list"},
		{"first problem's reason, every message", ctx, outs(OutputFailureDomains, `1`), v1alpha1.ReasonOutputsMissing, "must be a list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := MapOutputs(tt.ctx, tt.values)
			assert.Equal(t, tt.reason, o.Valid.Reason, o.Valid.Message)
			assert.Contains(t, o.Valid.Message, tt.msg)
		})
	}
}

func TestMapOutputsMachine(t *testing.T) {
	ctx := OutputsContext{Kind: v1alpha1.KindTerraformMachine, MachineFailureDomain: "fd-a"}
	o := MapOutputs(ctx, outs(
		OutputProviderID, `"fake://m1"`,
		OutputAddresses, `[{"type":"InternalIP","address":"10.0.0.5"}]`,
		OutputFailureDomain, `"fd-a"`,
		OutputInterruptible, `true`,
	))
	assert.Equal(t, v1alpha1.ReasonOutputsValid, o.Valid.Reason, o.Valid.Message)
	assert.Equal(t, "fake://m1", o.ProviderID)
	assert.Equal(t, []v1alpha1.MachineAddress{{Type: "InternalIP", Address: "10.0.0.5"}}, o.Addresses)
	assert.Equal(t, "fd-a", o.FailureDomain)
	assert.True(t, o.Interruptible)

	for _, tt := range []struct {
		name   string
		ctx    OutputsContext
		values map[string]json.RawMessage
		reason v1alpha1.ConditionReason
		msg    string
	}{
		{"provider id missing", ctx, outs(), v1alpha1.ReasonOutputsMissing, "provider_id is missing"},
		{"provider id pending", ctx, outs(OutputProviderID, `null`), v1alpha1.ReasonOutputsPending, "provider_id is null"},
		{"provider id changed", OutputsContext{Kind: v1alpha1.KindTerraformMachine, ProviderID: "fake://old"}, outs(OutputProviderID, `"fake://new"`), v1alpha1.ReasonProviderIDChanged, "fake://old to fake://new"},
		{"failure domain mismatch", ctx, outs(OutputProviderID, `"p"`, OutputFailureDomain, `"fd-b"`), v1alpha1.ReasonFailureDomainMismatch, `"fd-b" but the Machine's spec.failureDomain is "fd-a"`},
		{"failure domain free without the Machine's", OutputsContext{Kind: v1alpha1.KindTerraformMachine}, outs(OutputProviderID, `"p"`, OutputFailureDomain, `"fd-b"`), v1alpha1.ReasonOutputsValid, ""},
		{"address type", ctx, outs(OutputProviderID, `"p"`, OutputAddresses, `[{"type":"Public","address":"x"}]`), v1alpha1.ReasonOutputsInvalid, "not one of"},
		{"address empty", ctx, outs(OutputProviderID, `"p"`, OutputAddresses, `[{"type":"Hostname","address":""}]`), v1alpha1.ReasonOutputsInvalid, "empty"},
		{"interruptible not a bool", ctx, outs(OutputProviderID, `"p"`, OutputInterruptible, `"yes"`), v1alpha1.ReasonOutputsInvalid, "must be a bool"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := MapOutputs(tt.ctx, tt.values)
			assert.Equal(t, tt.reason, o.Valid.Reason, o.Valid.Message)
			assert.Contains(t, o.Valid.Message, tt.msg)
		})
	}
	o = MapOutputs(ctx, outs(OutputProviderID, `"p"`, OutputFailureDomain, `"fd-b"`))
	assert.Empty(t, o.FailureDomain, "a mismatched failure domain is not published")
}

func TestMapOutputsPool(t *testing.T) {
	ctx := OutputsContext{Kind: v1alpha1.KindTerraformMachinePool}
	o := MapOutputs(ctx, outs(OutputProviderIDList, `["fake://b","fake://a"]`, OutputReplicas, `2`))
	assert.Equal(t, v1alpha1.ReasonOutputsValid, o.Valid.Reason, o.Valid.Message)
	assert.Equal(t, []string{"fake://a", "fake://b"}, o.ProviderIDList)
	assert.True(t, o.HasProviderIDList)
	assert.Equal(t, int32(2), *o.Replicas)

	o = MapOutputs(ctx, outs(OutputProviderIDList, `[]`))
	assert.True(t, o.HasProviderIDList, "scaled to zero is a valid list")
	assert.Empty(t, o.ProviderIDList)
	assert.Nil(t, o.Replicas)

	o = MapOutputs(ctx, outs(OutputProviderIDList, `null`))
	assert.Equal(t, v1alpha1.ReasonOutputsPending, o.Valid.Reason)
	assert.False(t, o.HasProviderIDList)
	o = MapOutputs(ctx, outs(OutputProviderIDList, `[]`, OutputReplicas, `-1`))
	assert.Equal(t, v1alpha1.ReasonOutputsInvalid, o.Valid.Reason)
}

// SPEC K7, K8: the health output.
func TestHealth(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values map[string]json.RawMessage
		status metav1.ConditionStatus
		reason v1alpha1.ConditionReason
		msg    string
	}{
		{"no health output", outs(), metav1.ConditionTrue, v1alpha1.ReasonHealthy, "no health output"},
		{"null", outs(OutputHealth, `null`), metav1.ConditionUnknown, v1alpha1.ReasonHealthUnknown, "null"},
		{"not an object", outs(OutputHealth, `"ok"`), metav1.ConditionUnknown, v1alpha1.ReasonHealthUnknown, "must be an object"},
		{"empty object", outs(OutputHealth, `{}`), metav1.ConditionUnknown, v1alpha1.ReasonHealthUnknown, "must be an object"},
		{"healthy bool", outs(OutputHealth, `{"healthy":true}`), metav1.ConditionTrue, v1alpha1.ReasonHealthy, "healthy"},
		{"unhealthy bool", outs(OutputHealth, `{"healthy":false,"message":"disk full"}`), metav1.ConditionFalse, v1alpha1.ReasonInstanceUnhealthy, "disk full"},
		{"state healthy", outs(OutputHealth, `{"state":"Healthy"}`), metav1.ConditionTrue, v1alpha1.ReasonHealthy, ""},
		{"degraded", outs(OutputHealth, `{"state":"degraded"}`), metav1.ConditionTrue, v1alpha1.ReasonInstanceDegraded, "degraded"},
		{"pending", outs(OutputHealth, `{"state":"pending"}`), metav1.ConditionUnknown, v1alpha1.ReasonInstancePending, ""},
		{"provisioning", outs(OutputHealth, `{"state":"provisioning"}`), metav1.ConditionUnknown, v1alpha1.ReasonProvisioning, ""},
		{"stopped", outs(OutputHealth, `{"state":"stopped"}`), metav1.ConditionFalse, v1alpha1.ReasonInstanceStopped, ""},
		{"terminated", outs(OutputHealth, `{"state":"terminated"}`), metav1.ConditionFalse, v1alpha1.ReasonInstanceTerminated, ""},
		{"unknown state", outs(OutputHealth, `{"state":"sleepy"}`), metav1.ConditionUnknown, v1alpha1.ReasonHealthUnknown, "sleepy"},
		{"long message cut", outs(OutputHealth, `{"healthy":false,"message":"`+strings.Repeat("m", 1000)+`"}`), metav1.ConditionFalse, v1alpha1.ReasonInstanceUnhealthy, "..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := MapOutputs(OutputsContext{Kind: v1alpha1.KindTerraformMachine}, tt.values).Health
			assert.Equal(t, tt.status, h.Status)
			assert.Equal(t, tt.reason, h.Reason)
			assert.Contains(t, h.Message, tt.msg)
			assert.LessOrEqual(t, len(h.Message), maxHealthMessage+3)
		})
	}
}

// SPEC K8: once provisioned, Ready follows health and deletion.
func TestReady(t *testing.T) {
	healthy := Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonHealthy, Message: "h"}
	_, ok := Ready(false, false, healthy)
	assert.False(t, ok, "before provisioning the summary decides")

	c, ok := Ready(true, false, healthy)
	assert.True(t, ok)
	assert.Equal(t, Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReady, Message: "provisioned and healthy"}, c)

	c, _ = Ready(true, false, Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInstanceDegraded, Message: "slow disk"})
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, "slow disk")

	c, _ = Ready(true, false, Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInstanceStopped, Message: "stopped"})
	assert.Equal(t, Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInstanceStopped, Message: "InfrastructureHealthy: stopped"}, c)

	c, _ = Ready(true, true, healthy)
	assert.Equal(t, v1alpha1.ReasonDeleting, c.Reason)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
}
