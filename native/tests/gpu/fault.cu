// fault.cu — the device-side fault of scripts/gpu-check.sh: a kernel that
// writes through a wild pointer, so the context takes a sticky
// CUDA_ERROR_ILLEGAL_ADDRESS while a copy job of the CUDA backend is in
// flight. Compiled on the GPU machine by `nvcc -ptx` (the only thing there
// that needs nvcc) and loaded by okv_gpu_check with cuModuleLoad.
extern "C" __global__ void okv_fault(void) { *(volatile int *)0x10 = 1; }
