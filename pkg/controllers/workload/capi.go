package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// The outputs a module declares for Cluster API's fields (SPEC T5).
const (
	outputControlPlaneEndpoint = "control_plane_endpoint"
	outputProviderID           = "provider_id"
	outputProviderIDList       = "provider_id_list"
)

// Bounds the CRD enforces on the fields; checked here first so that a bad
// output is reported, not refused by the API server on every pass.
const (
	maxFieldLength    = 512
	maxProviderIDList = 10000
)

// parseEndpoint reads the output control_plane_endpoint: an object with
// host and port ({"host": "h", "port": 6443}, the port a number or a
// decimal string), or a "host:port" string ("[v6]:port" for IPv6).
func parseEndpoint(raw []byte) (v1alpha1.APIEndpoint, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return v1alpha1.APIEndpoint{}, fmt.Errorf("%s: %q is not host:port ([v6]:port for IPv6)", outputControlPlaneEndpoint, truncateForMessage(s))
		}
		return endpoint(host, port)
	}
	var o struct {
		Host *string         `json:"host"`
		Port json.RawMessage `json:"port"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.Host == nil || o.Port == nil {
		return v1alpha1.APIEndpoint{}, fmt.Errorf("%s must be an object with host and port, or a \"host:port\" string", outputControlPlaneEndpoint)
	}
	var port string
	if err := json.Unmarshal(o.Port, &port); err != nil {
		port = string(bytes.TrimSpace(o.Port))
	}
	return endpoint(*o.Host, port)
}

func endpoint(host, port string) (v1alpha1.APIEndpoint, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if err := checkField(outputControlPlaneEndpoint+" host", host); err != nil {
		return v1alpha1.APIEndpoint{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return v1alpha1.APIEndpoint{}, fmt.Errorf("%s: port %q is not a number from 1 to 65535", outputControlPlaneEndpoint, truncateForMessage(port))
	}
	return v1alpha1.APIEndpoint{Host: host, Port: int32(p)}, nil
}

// parseProviderID reads the output provider_id: a string.
func parseProviderID(raw []byte) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s must be a string", outputProviderID)
	}
	return s, checkField(outputProviderID, s)
}

// parseProviderIDList reads the output provider_id_list: a list of
// strings.
func parseProviderIDList(raw []byte) ([]string, error) {
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("%s must be a list of strings", outputProviderIDList)
	}
	if len(l) > maxProviderIDList {
		return nil, fmt.Errorf("%s has %d items, more than %d", outputProviderIDList, len(l), maxProviderIDList)
	}
	for i, s := range l {
		if err := checkField(fmt.Sprintf("%s[%d]", outputProviderIDList, i), s); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func checkField(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > maxFieldLength:
		return fmt.Errorf("%s is %d bytes, more than %d", what, len(s), maxFieldLength)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return errors.New(what + " contains white space or control characters")
	}
	return nil
}

// truncateForMessage keeps an output's value short in a condition message
// (outputs named here are not sensitive: T4 never hands sensitive ones on).
func truncateForMessage(s string) string {
	const n = 64
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
