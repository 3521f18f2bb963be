// `asgd shm info|remove NAME`: inspect and clean up shared parameter segments.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "cli_common.hpp"

namespace asgd::cli {

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

  auto force = std::make_shared<bool>(false);
  auto* remove = shm->add_subcommand("remove", "Remove a segment's name (attached processes keep their mapping)");
  remove->add_option("name", *name, "Segment name")->required();
  remove->add_flag("--force", *force,
                   "Remove it even while live processes write to it, or when it is not an asgd parameter segment");
  remove->callback([name, force, &exit_code] {
    exit_code = run_guarded([&] {
      if (!ParamStore::exists_shared(*name)) throw InputError(fmt::format("no shared segment '{}'", *name));
      // Another user's, which only its owner or root may remove: --force would not help, so none is suggested.
      ParamStore::check_removable_shared(*name);
      if (!*force) {
        SegmentInfo info;
        try {
          info = ParamStore::inspect_shared(*name);
        } catch (const UntrustedSegment& e) {
          // Removable (root, or its owner), but another user's or open to others: say whose, and remove only when told.
          throw InputError(fmt::format("shared segment '{}' belongs to {}{}; not removed (pass --force to remove it "
                                       "anyway)",
                                       *name, UntrustedSegment::whose(e.owner_uid, e.mode),
                                       e.foreign() ? "" : ", open to other users"));
        } catch (const InputError& e) {
          // What a creator killed before writing the header left holds nothing, and nobody is making it.
          if (const auto left = ParamStore::abandoned_shared(*name)) {
            if (!ParamStore::remove_shared(*name, *left)) {
              throw InputError(fmt::format("shared segment '{}' changed meanwhile (made again, or removed); "
                                           "not removed: look again (asgd shm info {})",
                                           *name, *name));
            }
            fmt::print("removed {} (its creator died before writing its header)\n", *name);
            return 0;
          }
          // Another program's shared memory (Open MPI's, a database's) is not ours to remove unless told to.
          throw InputError(fmt::format("{}; not removed (pass --force to remove it anyway)", e.what()));
        }
        if (!info.writers.empty()) {
          throw InputError(fmt::format("segment '{}' has {} live writer(s) ({} {}); a new trainer would start a "
                                       "second model under the same name. Stop them, or pass --force",
                                       *name, info.writers.size(), info.writers.size() > 1 ? "pids" : "pid",
                                       fmt::join(info.writers, ", ")));
        }
      }
      if (!ParamStore::remove_shared(*name)) {
        if (ParamStore::exists_shared(*name))
          throw RuntimeError(fmt::format("shared segment '{}' could not be removed (asgd shm info {} says whose it is)",
                                         *name, *name));
        throw InputError(fmt::format("no shared segment '{}'", *name));
      }
      fmt::print("removed {}\n", *name);
      return 0;
    });
  });
}

}  // namespace asgd::cli
