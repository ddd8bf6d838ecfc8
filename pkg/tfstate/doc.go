// Package tfstate reads the outputs of a Terraform (or OpenTofu) state as
// the built-in `kubernetes` state backend stores it (SPEC T2, T4). It is
// pure: it decodes Secrets that the caller fetches (through a function it
// is given), with no client and no logging.
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
// when a chunk holds exactly [ChunkSize] bytes: [Chunks] then fetches the
// next part by its name, one Secret at a time, as the decoder reads (SPEC
// B11: GETs of the backend's names, no LIST). [IsStateName] says which
// names those are: the state clean-up after a destroy deletes no other
// Secret, whatever its labels (B15).
//
// What this package owns of SPEC T4, B10 and X1:
//
//   - Reading is bounded while it happens, not after (B10, through package
//     bounded): at most [MaxStateBytes] (16 MiB) of compressed input and
//     of JSON, [MaxDepth] levels of nesting, [MaxValues] values, object
//     keys of at most [MaxKey] bytes. The JSON is walked as a stream: the
//     format version and the outputs are kept, everything else (resources,
//     check results) is validated and skipped, never held. Each output
//     value is captured as compact JSON within what is left of a budget of
//     twice [MaxOutputsBytes], dropped once its output proves sensitive,
//     and only the values kept are decoded into Go values to be made
//     canonical. So a small gzip of [0,0,0,...] or of deep nesting costs
//     the decompressor's window and a few buffers (tens of KiB), not the
//     hundreds of MiB of decoding it into Go values.
//   - Only non-sensitive outputs keep their values ([Outputs.Values]); a
//     sensitive output contributes its name only ([Outputs.Sensitive]).
//   - Errors never quote the state: [Error] messages are fixed texts with
//     sizes and offsets, because a JSON decoder's own message can quote a
//     character or a number of the input, which may belong to a sensitive
//     value (X1).
//   - [Outputs.Encode] enforces [MaxOutputsBytes] (32 KiB) on what goes to
//     status.outputs.
//
// Every failure is an [*Error] whose [Kind] the controller maps to an
// OutputsAvailable reason: [KindNotFound] to StateNotFound,
// [KindOutputsTooLarge] to OutputsTooLarge, every other kind to
// OutputsReadFailed.
package tfstate
