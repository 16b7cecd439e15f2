// Unity file: compiles the protobuf-c code generated from proto/lifecycle.proto.
#include "../../../native/src/proto/lifecycle.pb-c.c"
