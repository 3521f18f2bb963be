// The README's library example: least squares y = 3x - 1 fitted by 4 Hogwild! workers.
#include <asgd/engine/trainer.hpp>
#include <cmath>
#include <cstdio>

struct LineFit {                          // a Problem: examples + gradient of one example
  std::size_t num_examples() const { return 10000; }
  template <class Sink> double gradient(std::size_t i, Sink& sink) const {
    const float x = static_cast<float>(i % 100) / 100.0f, y = 3.0f * x - 1.0f;
    const float err = sink.read(0) * x + sink.read(1) - y;   // parameters: slope, intercept
    sink.add_gradient(0, err * x);                            // the engine applies lr and policy
    sink.add_gradient(1, err);
    return 0.5 * err * err;
  }
};

int main() {
  asgd::Layout layout;
  layout.add("line", {2});
  auto params = asgd::ParamStore::on_heap(layout);   // or ParamStore::create_shared("name", layout)
  asgd::TrainerOptions options;
  options.workers = 4;                                // Hogwild!: racy updates, no locks
  options.epochs = 20;
  options.schedule.lr = 0.5f;
  LineFit problem;
  const auto report = asgd::Trainer(params, options).run(problem);
  std::printf("slope %.3f intercept %.3f; %s\n", params.load(0), params.load(1), report.summary().c_str());
  return std::abs(params.load(0) - 3.0f) < 0.05f && std::abs(params.load(1) + 1.0f) < 0.05f ? 0 : 1;
}
