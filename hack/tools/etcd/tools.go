//go:build tools

// Package tools records the etcd command this module builds. It is never compiled.
package tools

import _ "go.etcd.io/etcd/server/v3"
