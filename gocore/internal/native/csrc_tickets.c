// Unity file: compiles native/src/tickets.c into this cgo package (see
// doc.go); the same source CMake builds, nothing duplicated.
#include "../../../native/src/tickets.c"
