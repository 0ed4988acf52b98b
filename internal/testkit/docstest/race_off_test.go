//go:build !race

package docstest

// raceBuild: see race_on_test.go.
const raceBuild = false
