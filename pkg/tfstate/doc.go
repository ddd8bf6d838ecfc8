// Package tfstate reads the outputs of a Terraform (or OpenTofu) state as
// the built-in `kubernetes` state backend stores it (SPEC T2, T4). It is
// pure: it decodes Secrets that the caller fetched, with no client, no I/O
// and no logging.
//
// The backend keeps workspace default of secret_suffix <suffix> in the
// Secret tfstate-default-<suffix>, labelled tfstate=true,
// tfstateSecretSuffix=<suffix>, tfstateWorkspace=default and
// app.kubernetes.io/managed-by=terraform, whose data key "tfstate" holds
// the state file (JSON, format version 4) compressed with gzip. OpenTofu
// never splits it. HashiCorp Terraform (since hashicorp/terraform#29678)
// splits the gzip stream into chunks of [ChunkSize] bytes: chunk 0 in
// tfstate-default-<suffix>, chunk i in tfstate-default-<suffix>-part-<i>,
// every one with the same labels and key; the reader concatenates them in
// index order and decompresses the whole. A state is therefore split only
// when its first Secret holds exactly [ChunkSize] bytes ([MaybeSplit]); the
// caller then lists the parts by [Selector] and [Assemble] orders them.
//
// What this package owns of SPEC T4 and X1:
//
//   - Decompression is bounded: at most [MaxStateBytes] (16 MiB) of JSON is
//     ever held, whatever the compressed input expands to (a decompression
//     bomb reads [MaxStateBytes]+1 bytes and stops); the compressed input is
//     bounded the same way.
//   - Only non-sensitive outputs keep their values ([Outputs.Values]); a
//     sensitive output contributes its name only ([Outputs.Sensitive]).
//     The decoder keeps nothing else of the state: not resources, not the
//     values of sensitive outputs.
//   - Errors never quote the state: [Error] messages are fixed texts with
//     sizes and offsets, because a JSON decoder's own message can quote a
//     character or a number of the input, which may belong to a sensitive
//     value (X1).
//   - [Outputs.JSON] enforces [MaxOutputsBytes] (32 KiB) on what goes to
//     status.outputs.
//
// Every failure is an [*Error] whose [Kind] the controller maps to an
// OutputsAvailable reason: [KindNotFound] to StateNotFound,
// [KindOutputsTooLarge] to OutputsTooLarge, every other kind to
// OutputsReadFailed.
package tfstate
