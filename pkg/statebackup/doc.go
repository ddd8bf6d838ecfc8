// Package statebackup decides the state backups of SPEC O5, purely: the
// names and labels of a backup Secret, which Secrets listed by label are
// backups of a suffix (by name and labels both, as B15 asks of the state
// clean-up), whether a serial is due a backup, and which backups the
// retention keeps and which it prunes. It has no client and no logging:
// package workload gathers (the state read after an apply, a paged LIST of
// the backups) and writes (create, delete) from its answers.
//
// A backup of serial S of the state of secret_suffix X is the Secret
// captf-state-backup-X-S, and, for a state HashiCorp Terraform split into
// parts, captf-state-backup-X-S-part-i for part i >= 1: each a copy of the
// data of the state Secret (or part) of the same index. They are labelled
// captf.io/state-backup=true, captf.io/state-backup-suffix=X,
// captf.io/state-backup-serial=S and captf.io/state-backup-part=i, so the
// backups of one object are one label selector away (B13), and they carry
// none of the backend's labels, so neither Terraform nor the state
// clean-up after a destroy ever takes one for state.
package statebackup
