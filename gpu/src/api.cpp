// asgd::gpu as the apps and tests link it, in every build.
//
// With CUDA (ASGD_GPU_BACKEND_NAME defined) each function forwards to the
// backend module, which is loaded on the first call: `asgd w2v` or `asgd mf`
// never load cuBLAS. Without CUDA the functions say this build has none.
#include <string>
#include <utility>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/gpu/gpu.hpp"

#if defined(ASGD_GPU_BACKEND_NAME)
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "backend.hpp"
#endif

namespace asgd::gpu {
namespace {

#if defined(ASGD_GPU_BACKEND_NAME)

struct Loaded {
  const detail::Backend* table = nullptr;
  std::string error;  // why table is null
};

// The paths add_backend_path gave (a function's static: it may be called while other statics start).
std::mutex& added_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& added_paths() {
  static std::vector<std::string> paths;
  return paths;
}

// Where the module may be, in order: $ASGD_GPU_BACKEND (exactly that file,
// when set), beside the executable, the install's lib/asgd next to its bin/,
// the paths added (a program built against the installed package: that
// install's), and for an executable inside the build tree asgd was built in,
// that tree's module (another checkout's or version's must not stand in for an
// install's).
bool inside(const std::filesystem::path& file, const std::filesystem::path& dir) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::weakly_canonical(dir, ec);  // /proc/self/exe's is resolved
  const auto rel = file.lexically_normal().lexically_relative(ec ? dir.lexically_normal() : real);
  return !rel.empty() && *rel.begin() != "..";
}

std::vector<std::string> candidates() {
  if (const char* env = std::getenv("ASGD_GPU_BACKEND"); env != nullptr && *env != '\0') return {env};
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / ASGD_GPU_BACKEND_NAME).string());
    out.push_back((exe.parent_path() / ".." / ASGD_GPU_BACKEND_INSTALL_DIR / ASGD_GPU_BACKEND_NAME).string());
  }
  {
    std::scoped_lock lock(added_mutex());
    out.insert(out.end(), added_paths().begin(), added_paths().end());
  }
  if (!ec && inside(exe, ASGD_GPU_BUILD_TREE)) out.push_back(ASGD_GPU_BACKEND_BUILD_PATH);
  return out;
}

const Loaded& backend() {
  static const Loaded loaded = [] {
    Loaded l;
    std::string tried;
    for (const std::string& path : candidates()) {
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) {
        tried += (tried.empty() ? "" : ", ") + path;
        continue;
      }
      // By its absolute path: dlopen looks a name without a '/' up in the library path, not here. Never
      // closed: the CUDA runtime must outlive every buffer.
      const std::filesystem::path file = std::filesystem::absolute(path, ec);
      void* handle = dlopen(ec ? path.c_str() : file.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* why = dlerror();
        l.error = "the CUDA backend " + path + " could not be loaded: " + (why ? why : "unknown dlopen error");
        return l;
      }
      using Entry = const detail::Backend* (*)();
      auto entry = reinterpret_cast<Entry>(dlsym(handle, kAsgdGpuBackendSymbol));
      if (entry == nullptr) {
        l.error = "the CUDA backend " + path + " has no " + kAsgdGpuBackendSymbol;
        return l;
      }
      const detail::Backend* table = entry();
      if (table == nullptr || table->abi != detail::kBackendAbi) {
        l.error = "the CUDA backend " + path + " is from another build of asgd (rebuild it)";
        return l;
      }
      l.table = table;
      return l;
    }
    const char* env = std::getenv("ASGD_GPU_BACKEND");
    if (env != nullptr && *env != '\0') {
      // The variable names the one file to load: saying "set it" would not help.
      l.error = std::string("ASGD_GPU_BACKEND=") + env + ": no such file (it names the CUDA backend, " +
                ASGD_GPU_BACKEND_NAME + "; unset it to look in the usual places)";
    } else {
      l.error = std::string("the CUDA backend ") + ASGD_GPU_BACKEND_NAME + " was not found (looked for " + tried +
                "; set ASGD_GPU_BACKEND to its path)";
    }
    return l;
  }();
  return loaded;
}

// The backend's table, or RuntimeError saying why there is none.
const detail::Backend& table() {
  const Loaded& b = backend();
  if (b.table == nullptr) throw RuntimeError("gpu: " + b.error);
  return *b.table;
}

#else

[[noreturn]] void no_cuda() { throw RuntimeError("gpu: " + unavailable()); }

#endif

}  // namespace

#if defined(ASGD_GPU_BACKEND_NAME)

bool built_with_cuda() noexcept { return true; }

void add_backend_path(std::string path) {
  std::scoped_lock lock(added_mutex());
  added_paths().push_back(std::move(path));
}

std::string unavailable() {
  const Loaded& b = backend();
  return b.table == nullptr ? b.error : b.table->unavailable();
}

std::string describe_device() { return table().describe_device(); }

std::vector<dense::EpochReport> train(const dense::Network& net, ParamStore& params,
                                      std::vector<float>& momentum_buffer, const dense::Dataset& data,
                                      const dense::Dataset* test, const GpuTrainOptions& options,
                                      const std::function<void(const dense::EpochReport&)>& on_epoch) {
  return table().train(net, params, momentum_buffer, data, test, options, on_epoch);
}

dense::EvalResult evaluate(const dense::Network& net, const float* params, const dense::Dataset& data,
                           std::size_t batch, std::span<double> seconds) {
  return table().evaluate(net, params, data, batch, seconds);
}

double sgemm_gflops(std::size_t n, std::size_t repeats) { return table().sgemm_gflops(n, repeats); }

void layer_forward(const dense::Network& net, std::size_t layer, const float* params, const float* in, float* out,
                   std::size_t n) {
  table().layer_forward(net, layer, params, in, out, n);
}

void layer_backward(const dense::Network& net, std::size_t layer, const float* params, const float* in,
                    const float* dout, float* din, float* grad, std::size_t n) {
  table().layer_backward(net, layer, params, in, dout, din, grad, n);
}

double loss_and_gradient(const dense::Network& net, const float* params, const float* x, const std::uint8_t* labels,
                         std::size_t n, float* grad) {
  return table().loss_and_gradient(net, params, x, labels, n, grad);
}

#else

bool built_with_cuda() noexcept { return false; }

void add_backend_path(std::string) {}  // no module to look for

std::string unavailable() {
  return "this asgd was built without CUDA (nvcc and cuBLAS were not found when it was configured; "
         "see ASGD_WITH_CUDA in the README)";
}

std::string describe_device() { no_cuda(); }

std::vector<dense::EpochReport> train(const dense::Network&, ParamStore&, std::vector<float>&, const dense::Dataset&,
                                      const dense::Dataset*, const GpuTrainOptions&,
                                      const std::function<void(const dense::EpochReport&)>&) {
  no_cuda();
}

dense::EvalResult evaluate(const dense::Network&, const float*, const dense::Dataset&, std::size_t, std::span<double>) {
  no_cuda();
}

double sgemm_gflops(std::size_t, std::size_t) { no_cuda(); }

void layer_forward(const dense::Network&, std::size_t, const float*, const float*, float*, std::size_t) { no_cuda(); }

void layer_backward(const dense::Network&, std::size_t, const float*, const float*, const float*, float*, float*,
                    std::size_t) {
  no_cuda();
}

double loss_and_gradient(const dense::Network&, const float*, const float*, const std::uint8_t*, std::size_t,
                         float*) {
  no_cuda();
}

#endif

}  // namespace asgd::gpu
