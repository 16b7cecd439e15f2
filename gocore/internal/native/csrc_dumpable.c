// Unity file: compiles native/src/dumpable.c into this cgo package (see doc.go);
// the same source CMake builds, nothing duplicated.
#include "../../../native/src/dumpable.c"
