// `asgd shm info|remove NAME`: inspect and clean up shared parameter segments.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/segment_removal.hpp"
#include "cli_common.hpp"

namespace asgd::cli {

namespace {
constexpr std::pair<std::string_view, std::string_view> kNames[] = {{"RemoveSegmentOptions::force", "--force"}};
}  // namespace

void add_shm_commands(CLI::App& app, int& exit_code) {
  auto* shm = app.add_subcommand("shm", "Inspect or remove shared-memory parameter segments");
  shm->require_subcommand(1);
  auto name = std::make_shared<std::string>();

  auto* info = shm->add_subcommand("info", "Print a segment's header, layout and attached processes");
  info->add_option("name", *name, "Segment name")->required();
  info->callback([name, &exit_code] {
    exit_code = run_guarded([&] {
      const SegmentInfo i = ParamStore::inspect_shared(*name);
      fmt::print("segment {}: format {}, {} floats, layout hash {:016x}, created by pid {}{}\n", i.name,
                 i.format_version, i.elements, i.layout_hash, i.creator_pid, i.ready ? "" : " (NOT READY)");
      fmt::print("{}", Layout::parse(i.layout).describe());
      if (!i.settings.empty()) fmt::print("trained with: {}\n", i.settings);
      fmt::print("live writers: {}\n", fmt::join(i.writers, " "));
      if (!i.dead_writers.empty()) {
        fmt::print("DEAD writers: {} (killed without detaching; the segment is stale)\n",
                   fmt::join(i.dead_writers, " "));
      }
      return i.stale() ? kExitRuntime : 0;
    });
  });

  auto options = std::make_shared<RemoveSegmentOptions>();
  auto* remove = shm->add_subcommand("remove", "Remove a segment's name (attached processes keep their mapping)");
  remove->add_option("name", *name, "Segment name")->required();
  remove->add_flag("--force", options->force,
                   "Remove it even while live processes write to it, or when it is not an asgd parameter segment");
  remove->callback([name, options, &exit_code] {
    exit_code = run_guarded(
        [&] {
          const SegmentRemoved removed = remove_segment(*name, *options);
          fmt::print("removed {}{}\n", *name,
                     removed == SegmentRemoved::abandoned ? " (its creator died before writing its header)" : "");
          return 0;
        },
        kNames);
  });
}

}  // namespace asgd::cli
