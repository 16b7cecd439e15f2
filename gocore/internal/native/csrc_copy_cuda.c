// Unity file: compiles native/src/copy_cuda.c (the CUDA copy backend, which
// dlopens libcuda.so.1 at run time) into this cgo package (see doc.go);
// cuda.h comes from build/cuda/include (ci/cuda-headers.sh, run by make).
#include "../../../native/src/copy_cuda.c"
