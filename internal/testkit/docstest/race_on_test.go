//go:build race

package docstest

// raceBuild makes the test build the binaries as the test binary is built,
// so `go test -race ./...` reuses the packages it compiled anyway.
const raceBuild = true
