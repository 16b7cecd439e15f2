// Unity file: compiles the bench loops of native/bench into this cgo package
// (see doc.go). They are part of orbitkv-bench only, never of liborbitkv.
#include "../../../native/bench/pingpong.c"
#include "../../../native/bench/ping.c"
#include "../../../native/bench/discover.c"
