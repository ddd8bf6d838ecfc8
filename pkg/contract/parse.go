package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// The parsers of the single contract outputs (SPEC K7), each bounded
// as the CRD field it fills.

// ParseEndpoint reads the output control_plane_endpoint: an object with
// host and port ({"host": "h", "port": 6443}, the port a number or a
// decimal string), or a "host:port" string ("[v6]:port" for IPv6).
func ParseEndpoint(raw []byte) (v1alpha1.APIEndpoint, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return v1alpha1.APIEndpoint{}, fmt.Errorf("%s: %q is not host:port ([v6]:port for IPv6)", OutputControlPlaneEndpoint, truncate(s))
		}
		return endpoint(host, port)
	}
	var o struct {
		Host *string         `json:"host"`
		Port json.RawMessage `json:"port"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.Host == nil || o.Port == nil {
		return v1alpha1.APIEndpoint{}, fmt.Errorf("%s must be an object with host and port, or a \"host:port\" string", OutputControlPlaneEndpoint)
	}
	var port string
	if err := json.Unmarshal(o.Port, &port); err != nil {
		port = string(bytes.TrimSpace(o.Port))
	}
	return endpoint(*o.Host, port)
}

func endpoint(host, port string) (v1alpha1.APIEndpoint, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if err := checkField(OutputControlPlaneEndpoint+" host", host, MaxFieldLength); err != nil {
		return v1alpha1.APIEndpoint{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return v1alpha1.APIEndpoint{}, fmt.Errorf("%s: port %q is not a number from 1 to 65535", OutputControlPlaneEndpoint, truncate(port))
	}
	return v1alpha1.APIEndpoint{Host: host, Port: int32(p)}, nil
}

// ParseProviderID reads the output provider_id: a string.
func ParseProviderID(raw []byte) (string, error) {
	return parseString(OutputProviderID, raw, MaxFieldLength)
}

// ParseProviderIDList reads the output provider_id_list: a list of
// strings, returned sorted and without duplicates (SPEC K7: kept current
// on every apply, so the order of the module's list must not cause a
// write).
func ParseProviderIDList(raw []byte) ([]string, error) {
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("%s must be a list of strings", OutputProviderIDList)
	}
	if len(l) > MaxProviderIDList {
		return nil, fmt.Errorf("%s has %d items, more than %d", OutputProviderIDList, len(l), MaxProviderIDList)
	}
	for i, s := range l {
		if err := checkField(fmt.Sprintf("%s[%d]", OutputProviderIDList, i), s, MaxFieldLength); err != nil {
			return nil, err
		}
	}
	slices.Sort(l)
	return slices.Compact(l), nil
}

func parseString(name string, raw []byte, maxLen int) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("output %s must be a string", name)
	}
	return s, checkField("output "+name, s, maxLen)
}

func parseFailureDomains(raw []byte) ([]v1alpha1.FailureDomain, error) {
	// A list of {name, controlPlane, attributes}, or a map of name to
	// {controlPlane, attributes} (Cluster API v1beta1's shape).
	var list []v1alpha1.FailureDomain
	if err := json.Unmarshal(raw, &list); err != nil {
		var m map[string]struct {
			ControlPlane *bool             `json:"controlPlane"`
			Attributes   map[string]string `json:"attributes"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("output %s must be a list of {name, controlPlane, attributes} or a map of name to {controlPlane, attributes}", OutputFailureDomains)
		}
		for name, fd := range m {
			list = append(list, v1alpha1.FailureDomain{Name: name, ControlPlane: fd.ControlPlane, Attributes: fd.Attributes})
		}
	}
	if len(list) > maxFailureDomains {
		return nil, fmt.Errorf("output %s has %d items, more than %d", OutputFailureDomains, len(list), maxFailureDomains)
	}
	seen := map[string]bool{}
	for i, fd := range list {
		if err := checkField(fmt.Sprintf("output %s[%d].name", OutputFailureDomains, i), fd.Name, 256); err != nil {
			return nil, err
		}
		if seen[fd.Name] {
			return nil, fmt.Errorf("output %s names %q twice", OutputFailureDomains, truncate(fd.Name))
		}
		seen[fd.Name] = true
		if len(fd.Attributes) > 64 {
			return nil, fmt.Errorf("output %s[%d] has more than 64 attributes", OutputFailureDomains, i)
		}
	}
	slices.SortFunc(list, func(a, b v1alpha1.FailureDomain) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

var addressTypes = []v1alpha1.MachineAddressType{"Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS"}

func parseAddresses(raw []byte) ([]v1alpha1.MachineAddress, error) {
	var list []v1alpha1.MachineAddress
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("output %s must be a list of {type, address}", OutputAddresses)
	}
	if len(list) > maxAddresses {
		return nil, fmt.Errorf("output %s has %d items, more than %d", OutputAddresses, len(list), maxAddresses)
	}
	for i, a := range list {
		if !slices.Contains(addressTypes, a.Type) {
			return nil, fmt.Errorf("output %s[%d].type %q is not one of Hostname, ExternalIP, InternalIP, ExternalDNS, InternalDNS", OutputAddresses, i, truncate(string(a.Type)))
		}
		if err := checkField(fmt.Sprintf("output %s[%d].address", OutputAddresses, i), a.Address, 256); err != nil {
			return nil, err
		}
	}
	return list, nil
}

func checkField(what, s string, maxLen int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > maxLen:
		return fmt.Errorf("%s is %d bytes, more than %d", what, len(s), maxLen)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return errors.New(what + " contains white space or control characters")
	}
	return nil
}

// truncate keeps an output's value short in a condition message (outputs
// here are not sensitive: T4 never hands sensitive ones on).
func truncate(s string) string {
	const n = 64
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
