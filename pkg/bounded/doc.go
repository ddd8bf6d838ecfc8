// Package bounded reads what tenants write within limits fixed before the
// first byte is read (SPEC B10, B11). Everything the manager decodes from
// tenant-written data goes through it: the Terraform state (package
// tfstate), and, as they come, the runner's result document in a Job's
// termination message, bootstrap data and variablesFrom sources.
//
// The limits hold while the data is read, not after it was:
//
//   - [Gunzip] counts compressed bytes in and decompressed bytes out and
//     stops at [Limits.MaxInput] and [Limits.MaxSize], so a gzip bomb costs
//     the decompressor's window, not what it expands to; [ReadAll] reads a
//     stream into memory up to a cap.
//   - [Decoder] walks JSON as a stream: it validates the whole document,
//     counts nesting depth, values and the length of every string and
//     number, and keeps nothing but what its caller asks for (an object
//     key, a value captured as compact JSON up to a size). A skipped value
//     of any size costs the decoder's buffer. A caller decodes the small
//     parts it captured into Go values.
//   - [Unmarshal] is the whole-document form for small documents (a
//     termination message of 4 KiB): the stream check first, then
//     encoding/json on what passed it.
//   - [LimitResponses] caps every response body of a client made from the
//     returned rest.Config: an uncached read of tenant-written objects
//     fails with [KindInput] past its budget instead of growing the heap.
//
// Every failure is an [*Error] whose message is a fixed text with sizes
// and offsets: it never quotes the input, which may hold a Secret's value
// (SPEC X1). Errors of the source reader pass through unchanged.
//
// The package is pure but for LimitResponses' transport: no client, no
// logging.
package bounded
