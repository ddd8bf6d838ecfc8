// Package runresult is the runner's result document (SPEC O1): the one
// versioned wire format between `captf runner` in a Job's pod and the
// manager, written by the runner to the pod's termination message and
// read by pkg/runclass (the manager does not read it yet: docs/design.md).
//
// Both sides use this package: the runner builds a [Result] and writes it
// with [Result.Marshal], which always fits [MaxBytes] (the kubelet keeps at
// most 4096 bytes of a termination message); the manager reads it with
// [Unmarshal], which decodes with pkg/bounded's small limits (SPEC B10)
// and then checks every field ([Result.Validate]): a document that fails
// either is refused whole, with an error that never quotes it.
//
// The error tail a document carries is redacted by the runner ([Redactor]):
// it replaces every value of the pod's environment (but for a few names
// known to carry none), of the credential files, of the variables and of
// the contract inputs with [Sensitive] before the tail is shortened
// ([Shorten]) and cleaned of control characters ([Clean]). No credential,
// variable, input or bootstrap value reaches the document (SPEC X1).
//
// The package is pure: no client, no I/O, no logging.
package runresult
