// Loading the linear model's inputs and outputs for the CLI: datasets (libsvm
// files or generated), model files (the checkpoint format plus metadata).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "asgd/engine/param_store.hpp"
#include "asgd/sparse/libsvm.hpp"
#include "asgd/sparse/linear.hpp"

namespace asgd::cli {

// Rows [begin, end) of `data` as a dataset of their own (same num_features).
sparse::SparseDataset slice_rows(const sparse::SparseDataset& data, std::size_t begin, std::size_t end);
// The rows `rows` of `data`, in that order (same num_features).
sparse::SparseDataset select_rows(const sparse::SparseDataset& data, std::span<const std::size_t> rows);

// The metadata stored with a linear model file ({"model": "logistic"} for
// the logistic loss, as before there was a choice; else "linear" and "loss").
// `ranks` > 0 is recorded: the ranks of an AdaGrad job under mpirun, each of
// which checkpoints its own sums (a resume needs as many). `options`, when
// not null, records the engine flags (engine_options) for a resume to check.
std::string linear_model_metadata(double l2, std::uint32_t features, sparse::LinearLoss loss, int ranks = 0,
                                  const nlohmann::json& options = nullptr);
// The ranks recorded by linear_model_metadata; 1 when none were.
int linear_model_ranks(const std::string& metadata);
// l2 from a model's metadata, or `fallback` when absent.
double linear_model_l2(const std::string& metadata, double fallback);
// The loss a model trained with (logistic when the metadata names none).
sparse::LinearLoss linear_model_loss(const std::string& metadata);

}  // namespace asgd::cli
