// Unity file: compiles native/src/discover_digest.c into this cgo package
// (see doc.go); the same source CMake builds, nothing duplicated.
#include "../../../native/src/discover_digest.c"
