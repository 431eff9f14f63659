// What a rank in the sandbox sees of CUDA: how many devices, which one, and whether a kernel
// runs on it. Built with nvcc (CUDA's runtime linked statically, so that an image holding only
// this program and its C library is enough); run by tests/gpu/sandbox_gpu_check.sh.
#include <cuda_runtime.h>

#include <cstdio>

__global__ void AddIndex(int* x) { x[threadIdx.x] += static_cast<int>(threadIdx.x); }

int main() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    std::printf("devices: 0 (%s)\n", cudaGetErrorString(e));
    return 3;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("devices: %d\ndevice 0: %s, pci bus %d\n", count, prop.name, prop.pciBusID);
  int* d = nullptr;
  int h[32] = {};
  if (cudaMalloc(&d, sizeof h) != cudaSuccess || cudaMemset(d, 0, sizeof h) != cudaSuccess) {
    std::printf("allocation failed\n");
    return 4;
  }
  AddIndex<<<1, 32>>>(d);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  int sum = 0;
  for (int v : h) sum += v;
  std::printf("kernel sum: %d (expected 496)\n", sum);
  return sum == 496 ? 0 : 5;
}
