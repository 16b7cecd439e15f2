// Package integration runs the real binaries (orbitkv-manager and its
// failpoints build, orbitkvctl, testclient, hostileclient) as separate
// processes, each started, watched and stopped through internal/launch:
// several clients connect, ping, one is killed with SIGKILL, and the
// Manager must drop exactly that session and keep serving the others. The
// binaries are built into a temporary directory by TestMain, so
// `go test ./test/...` needs no prior make.
package integration
