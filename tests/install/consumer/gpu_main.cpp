// A program that uses asgd::gpu from the installed package: in a CUDA build
// it must load the CUDA module of that install (the package tells the
// header where it is), not the one in the build tree asgd came from.
#include <asgd/gpu/gpu.hpp>
#include <cstdio>
#include <fstream>
#include <string>

int main() {
  const std::string why = asgd::gpu::unavailable();  // loads the module in a CUDA build
  std::printf("gpu: %s\n", why.empty() ? asgd::gpu::describe_device().c_str() : why.c_str());
  if (!asgd::gpu::built_with_cuda()) return 0;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool from_install = false, from_elsewhere = false;
  while (std::getline(maps, line)) {
    if (line.find("libasgd_gpu_cuda") == std::string::npos) continue;
    const bool ours = line.find(ASGD_EXPECTED_PREFIX) != std::string::npos;
    (ours ? from_install : from_elsewhere) = true;
    if (!ours) std::printf("mapped from outside the install: %s\n", line.c_str());
  }
  if (!from_install || from_elsewhere) {
    std::printf("the CUDA module was not loaded from the install %s\n", ASGD_EXPECTED_PREFIX);
    return 1;
  }
  return 0;
}
