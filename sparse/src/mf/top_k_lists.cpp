#include "asgd/sparse/mf/top_k_lists.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::sparse::mf {

namespace {

constexpr std::size_t kBatch = 128;  // users scored in one product

std::vector<std::vector<Recommendation>> lists_of(const LoadedModel& m, const SeenItems* seen,
                                                  std::span<const std::uint32_t> users, std::size_t k) {
  // Items without a training rating have no learnt factors: never recommended. Users without one score each
  // item as an unknown user does (the mean and the item's bias).
  return recommend(*m.store, m.scale, seen, users, k, kBatch, m.cold.items, m.cold.users);
}

}  // namespace

std::vector<Recommendation> recommend_for(const LoadedModel& model, const SeenItems* seen, std::uint32_t user,
                                          std::size_t k) {
  const std::uint32_t users[] = {user};
  std::vector<Recommendation> list = std::move(lists_of(model, seen, users, k)[0]);
  for (Recommendation& r : list) r.score = model.range.clip(r.score);
  return list;
}

TopKListsReport write_top_k_lists(const LoadedModel& model, const SeenItems* seen, std::size_t k,
                                  const std::filesystem::path& path) {
  if (k == 0) throw InputError("write_top_k_lists: k 0: expected at least 1 item per user");
  std::vector<std::uint32_t> users(FactorLayout::of(model.store->layout()).users);
  for (std::uint32_t u = 0; u < users.size(); ++u) users[u] = u;
  const std::size_t part = std::max<std::size_t>(kBatch, (std::size_t{1} << 24) / k / kBatch * kBatch);
  TopKListsReport report;
  report.users = users.size();
  AtomicFile out(path);
  std::string line;
  for (std::size_t first = 0; first < users.size(); first += part) {
    const std::span<const std::uint32_t> some(users.data() + first, std::min(part, users.size() - first));
    const auto start = std::chrono::steady_clock::now();
    const auto lists = lists_of(model, seen, some, k);
    report.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (std::size_t j = 0; j < some.size(); ++j) {
      for (std::size_t rank = 0; rank < lists[j].size(); ++rank) {
        line = fmt::format("{}\t{}\t{}\t{:.4f}\n", model.users.name(some[j]), rank + 1,
                           model.items.name(lists[j][rank].item), model.range.clip(lists[j][rank].score));
        out.write(line);
      }
    }
  }
  out.commit();
  return report;
}

}  // namespace asgd::sparse::mf
