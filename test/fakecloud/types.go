package fakecloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Resource is one thing the fake cloud keeps.
type Resource struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// CreatedWithGeneration is the credential generation of the create request.
	CreatedWithGeneration int `json:"createdWithGeneration"`
	// BootstrapDataBytes and BootstrapDataSHA256 describe the bootstrap
	// data the create carried (0 and "" without); the data itself is
	// returned by GET /resources/{id}/bootstrap-data only.
	BootstrapDataBytes  int    `json:"bootstrapDataBytes,omitempty"`
	BootstrapDataSHA256 string `json:"bootstrapDataSHA256,omitempty"`
	// BootstrapFormat is the format the create named with its data.
	BootstrapFormat string `json:"bootstrapFormat,omitempty"`
	// Content is what the create or the last PATCH set: the attribute
	// the fakecloud provider's resource reads back, so a change made
	// behind a module's back is drift (SPEC O7).
	Content string `json:"content,omitempty"`
}

// BootstrapData is the answer of GET /resources/{id}/bootstrap-data.
type BootstrapData struct {
	BootstrapData   string `json:"bootstrapData"`
	BootstrapFormat string `json:"bootstrapFormat,omitempty"`
}

// maxBootstrapData bounds the bootstrap data of one resource (a cloud's
// user data limit is of this order).
const maxBootstrapData = 64 << 10

// Request is what the server recorded about one request.
type Request struct {
	// Seq numbers requests from 1 in the order they arrived.
	Seq    int       `json:"seq"`
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	// ID is the resource id the request named or created, if any.
	ID string `json:"id,omitempty"`
	// Status is the HTTP status the server answered.
	Status int `json:"status"`
	// Matched is true when the credential was the current one.
	Matched bool `json:"matched"`
	// Credential is CredentialCurrent, CredentialPrevious, CredentialUnknown
	// or CredentialNone.
	Credential string `json:"credential"`
	// Generation is the generation of the credential used (1 for the first
	// value the server expected), 0 when unknown or none.
	Generation int `json:"generation"`
	// Source is the client's X-Credential-Source ("" when absent, "invalid"
	// when it was not a short lower-case word).
	Source string `json:"source"`
}

// createBody is what a create carries.
type createBody struct {
	Name            string `json:"name"`
	BootstrapData   string `json:"bootstrapData"`
	BootstrapFormat string `json:"bootstrapFormat"`
	Content         string `json:"content"`
}

func decodeCreate(r *http.Request) (createBody, error) {
	var body createBody
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 2*maxBootstrapData))
	if err := dec.Decode(&body); err != nil {
		return createBody{}, errors.New("body must be JSON {\"name\": \"...\"} with optional bootstrapData and bootstrapFormat")
	}
	if body.Name == "" || len(body.Name) > 253 {
		return createBody{}, errors.New("name must be 1 to 253 characters")
	}
	if len(body.BootstrapData) > maxBootstrapData {
		return createBody{}, fmt.Errorf("bootstrapData must be at most %d bytes", maxBootstrapData)
	}
	if len(body.BootstrapFormat) > 64 {
		return createBody{}, errors.New("bootstrapFormat must be at most 64 characters")
	}
	if len(body.Content) > maxContent {
		return createBody{}, fmt.Errorf("content must be at most %d bytes", maxContent)
	}
	return body, nil
}
