package profiling

import (
	"net/http"

	pyroscopepprof "github.com/grafana/pyroscope-go/http/pprof"
)

// ServeCPUProfile answers GET /debug/pprof/profile?seconds=N as
// net/http/pprof's Profile does (a CPU profile of N seconds, 30 by
// default), and keeps answering while a push runs: the push's CPU
// profiler then writes the same samples to the request too
// (pyroscope-go's http/pprof), where net/http/pprof would answer "cpu
// profiling already in use". Safe for concurrent use; a second request
// while one runs answers 500.
func ServeCPUProfile(w http.ResponseWriter, r *http.Request) { pyroscopepprof.Profile(w, r) }
