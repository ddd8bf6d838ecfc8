package fakecloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// maxContent bounds a resource's content.
const maxContent = 4 << 10

// patchBody is what PATCH /resources/{id} carries.
type patchBody struct {
	Content *string `json:"content"`
}

// patch sets a resource's content (PATCH /resources/{id}): how the
// fakecloud provider updates a resource, and how a test changes one behind
// a module's back (SPEC O7). s.mu is held.
func (s *Server) patch(w http.ResponseWriter, r *http.Request, id string) int {
	body, err := decodePatch(r)
	if err != nil {
		return httpError(w, http.StatusBadRequest, err.Error())
	}
	res, exists := s.resources[id]
	if !exists {
		return httpError(w, http.StatusNotFound, "no such resource")
	}
	res.Content = *body.Content
	s.resources[id] = res
	return writeJSON(w, http.StatusOK, res)
}

func decodePatch(r *http.Request) (patchBody, error) {
	var body patchBody
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 2*maxContent))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Content == nil {
		return patchBody{}, errors.New(`body must be JSON {"content": "..."}`)
	}
	if len(*body.Content) > maxContent {
		return patchBody{}, fmt.Errorf("content must be at most %d bytes", maxContent)
	}
	return body, nil
}
