// Package integration runs the real binaries (orbitkv-manager, orbitkvctl)
// as separate processes: several clients connect, ping, one is killed with
// SIGKILL, and the Manager must drop exactly that session and keep serving
// the others (issue 2, "Tests"). The binaries are built into a temporary
// directory by TestMain, so `go test ./test/...` needs no prior make.
package integration
