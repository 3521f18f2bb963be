// The plot of a sweep's CSV (bench/plot_staleness.py under Debian's
// /usr/bin/python3 and python3-matplotlib): loss against epoch and seconds.
#pragma once

#include <filesystem>
#include <string>

namespace asgd::bench {

// plot_staleness.py: under share/asgd once installed (found from the running executable's folder, wherever the
// install went, else where the configured prefix puts it), beside the sources in a build tree.
std::filesystem::path plot_script();

// Runs `script` on `csv` with `title`, writing `png`; false when it could not (no python, no matplotlib, no
// script, a script that failed). The plot goes to a temp file beside `png`, renamed over it on success: a
// killed or failed plot never leaves half a PNG, nor the temp file.
bool plot_csv(const std::filesystem::path& csv, const std::filesystem::path& png, const std::string& title,
              const std::filesystem::path& script = plot_script());

}  // namespace asgd::bench
