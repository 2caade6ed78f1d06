// Launch checks: what the current device allows each kernel (its static shared memory and, from
// its registers, the largest block; the grid limits), so that every launch is checked before it is
// made and a fast path that does not fit is never launched.
//
// A kernel's dynamic shared memory may reach the device's opt-in limit less the kernel's own
// static shared memory; above the kernel's current maximum (48 KiB less the static part unless
// raised) the attribute must be raised first, or the launch fails with "invalid argument".
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common.cuh"
#include "cuda_context.h"

namespace mmo1d {
namespace cuda {

struct KernelLimits {
  int64_t static_smem;       // the kernel's static shared memory
  int64_t max_dynamic_smem;  // the device's opt-in limit less static_smem
  int64_t allowed_dynamic;   // the kernel's current attribute (raised on demand)
  int max_threads;           // the largest block the kernel's registers allow
  int occupancy_threads = 0;  // the block size occupancy_blocks was computed for (0: none yet)
  int occupancy_blocks = 0;   // blocks per multiprocessor by registers and threads, no dynamic smem
};

// Guards every cached KernelLimits (the cache itself and the fields raised or filled on demand).
inline std::mutex& kernel_limits_mutex() {
  static std::mutex mutex;
  return mutex;
}

// A launch: grid (x, y), block size and dynamic shared memory.
struct LaunchShape {
  int64_t grid_x = 0, grid_y = 1;
  int threads = 0;
  int64_t smem = 0;
};

// The device limits of `kernel` on the current device, read once per device and kernel.
template <typename Kernel>
KernelLimits& kernel_limits(Kernel kernel) {
  static std::map<std::pair<int, const void*>, KernelLimits> cache;
  int dev = 0;
  MMO1D_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(kernel_limits_mutex());
  const auto key = std::make_pair(dev, reinterpret_cast<const void*>(kernel));
  auto it = cache.find(key);
  if (it == cache.end()) {
    cudaFuncAttributes attr;
    MMO1D_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    const int64_t optin = at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin;
    const int64_t stat = static_cast<int64_t>(attr.sharedSizeBytes);
    it = cache.emplace(key, KernelLimits{stat, optin - stat, attr.maxDynamicSharedSizeBytes, attr.maxThreadsPerBlock})
             .first;
  }
  return it->second;
}

// The largest dynamic shared memory a launch of `kernel` may use on the current device.
template <typename Kernel>
int64_t max_dynamic_smem(Kernel kernel) {
  return kernel_limits(kernel).max_dynamic_smem;
}

// Why `s` cannot launch `kernel` on the current device; empty when it can.
template <typename Kernel>
std::string launch_problem(Kernel kernel, const LaunchShape& s) {
  const KernelLimits& lim = kernel_limits(kernel);
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (s.grid_x < 1 || s.grid_x > prop->maxGridSize[0]) {
    return "grid of " + std::to_string(s.grid_x) + " blocks (the device allows 1 to " +
           std::to_string(prop->maxGridSize[0]) + ")";
  }
  if (s.grid_y < 1 || s.grid_y > prop->maxGridSize[1]) {
    return "grid height " + std::to_string(s.grid_y) + " (the device allows 1 to " +
           std::to_string(prop->maxGridSize[1]) + ")";
  }
  if (s.threads < 1 || s.threads > lim.max_threads) {
    return "block of " + std::to_string(s.threads) + " threads (the kernel allows at most " +
           std::to_string(lim.max_threads) + ")";
  }
  if (s.smem < 0 || s.smem > lim.max_dynamic_smem) {
    return std::to_string(s.smem) + " bytes of shared memory (the device allows " +
           std::to_string(lim.max_dynamic_smem) + " besides the kernel's static " + std::to_string(lim.static_smem) +
           ")";
  }
  return "";
}

// Blocks of `kernel` with `smem` bytes of dynamic shared memory that one multiprocessor's shared
// memory holds on the current device (lim: the kernel's limits).
inline int blocks_by_smem(const KernelLimits& lim, int64_t smem) {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  const int64_t per_block = smem + lim.static_smem + int64_t(prop->reservedSharedMemPerBlock);
  return static_cast<int>(int64_t(prop->sharedMemPerMultiprocessor) / per_block);
}

template <typename Kernel>
int blocks_by_smem(Kernel kernel, int64_t smem) {
  return blocks_by_smem(kernel_limits(kernel), smem);
}

// Blocks of `kernel` of `threads` threads that one multiprocessor holds by registers and threads
// alone (the occupancy calculator without dynamic shared memory), kept in the kernel's limits for
// the last block size asked.
template <typename Kernel>
int blocks_by_registers(Kernel kernel, KernelLimits& lim, int threads) {
  const std::lock_guard<std::mutex> lock(kernel_limits_mutex());
  if (lim.occupancy_threads != threads) {
    MMO1D_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&lim.occupancy_blocks, kernel, threads, 0));
    lim.occupancy_threads = threads;
  }
  return lim.occupancy_blocks;
}

// The most dynamic shared memory (16-byte multiples, at least `smem`) that a block of `kernel` of
// `threads` may take while a multiprocessor still holds as many of them as with `smem`: the
// block's share of the multiprocessor's shared memory, less a 128-byte allocation unit, where
// registers and threads allow no more blocks than shared memory does.
template <typename Kernel>
int64_t smem_share(Kernel kernel, int threads, int64_t smem) {
  KernelLimits& lim = kernel_limits(kernel);
  const int blocks = std::min(blocks_by_smem(lim, smem), blocks_by_registers(kernel, lim, threads));
  if (blocks < 1) return smem;
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  const int64_t share = int64_t(prop->sharedMemPerMultiprocessor) / blocks - int64_t(prop->reservedSharedMemPerBlock) -
                        lim.static_smem - 128;
  return std::max(smem, std::min(share, lim.max_dynamic_smem) / 16 * 16);
}

template <typename Kernel>
bool launch_fits(Kernel kernel, const LaunchShape& s) {
  return launch_problem(kernel, s).empty();
}

// Checks `s` against the device's limits for `kernel` (an error names the launch and the limit)
// and raises the kernel's dynamic shared-memory attribute when `s` needs more than it allows.
template <typename Kernel>
void prepare_launch(Kernel kernel, const LaunchShape& s, const char* what) {
  const std::string why = launch_problem(kernel, s);
  TORCH_CHECK(why.empty(), "oriented_dwconv1d: the ", what, " kernel cannot be launched on this device: ", why);
  KernelLimits& lim = kernel_limits(kernel);
  const std::lock_guard<std::mutex> lock(kernel_limits_mutex());
  if (s.smem > lim.allowed_dynamic) {
    MMO1D_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(s.smem)));
    lim.allowed_dynamic = s.smem;
  }
}

inline dim3 grid_of(const LaunchShape& s) {
  return dim3(static_cast<unsigned>(s.grid_x), static_cast<unsigned>(s.grid_y));
}

// The launches themselves (nvcc only: the C++ sources of the CUDA build plan, they do not launch).
#if defined(__CUDACC__)

// Launches `kernel` on the current stream and checks that the launch was accepted.
template <typename Kernel, typename... KernelArgs>
void launch_on_stream(Kernel kernel, dim3 grid, int threads, size_t smem, const KernelArgs&... args) {
  kernel<<<grid, threads, smem, at::cuda::getCurrentCUDAStream()>>>(args...);
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

// A planned launch: prepare_launch(kernel, s, what), then `kernel` with s's grid, block and dynamic
// shared memory.
template <typename Kernel, typename... KernelArgs>
void launch_planned(Kernel kernel, const LaunchShape& s, const char* what, const KernelArgs&... args) {
  prepare_launch(kernel, s, what);
  launch_on_stream(kernel, grid_of(s), s.threads, static_cast<size_t>(s.smem), args...);
}

#endif  // defined(__CUDACC__)

}  // namespace cuda
}  // namespace mmo1d
