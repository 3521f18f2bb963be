// Top-k recommendation from a model file: one user's list, or every user's written to a file (TSV: user, rank,
// item, score) a part of the users at a time, so that memory stays bounded whatever the users and k.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/recommend.hpp"

namespace asgd::sparse::mf {

// The k best items for `user` (a row of the model; InputError otherwise), best first, the items of `seen` (null:
// none) and the model's cold items left out; a cold user scores items by their biases alone. Scores are as
// predictions say them: clipped into the training ratings' range (BPR scores have none).
std::vector<Recommendation> recommend_for(const LoadedModel& model, const SeenItems* seen, std::uint32_t user,
                                          std::size_t k);

// Every user's list, as recommend_for makes it, written atomically to `path` ("-": stdout) as lines
// "user\trank\titem\tscore" (score to 4 decimals), users in id order; scored about 2^24 recommendations a
// part (all the lists at once held 5.5 GB for k 10000 over 70,000 users). InputError when k is 0.
struct TopKListsReport {
  std::size_t users = 0;
  double seconds = 0;  // scoring and ranking
};
TopKListsReport write_top_k_lists(const LoadedModel& model, const SeenItems* seen, std::size_t k,
                                  const std::filesystem::path& path);

}  // namespace asgd::sparse::mf
