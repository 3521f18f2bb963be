// train_word2vec: word2vec trained in one call from a text file, as a C++
// program (or the Python module) calls it: quality, events, resume, errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "asgd/sparse/word2vec/evaluation.hpp"
#include "asgd/sparse/word2vec/training.hpp"

namespace fs = std::filesystem;
using namespace asgd::sparse::w2v;
using asgd::testing::message_of;
using asgd::testing::ScratchDir;

namespace {

constexpr int kTopics = 4, kWordsPerTopic = 8;

// Sentences of 8 words, each from one topic: topic t's words are "t<t>w<i>".
std::string planted_text(std::size_t sentences) {
  std::mt19937 rng(7);
  std::ostringstream text;
  for (std::size_t s = 0; s < sentences; ++s) {
    const int topic = static_cast<int>(rng() % kTopics);
    for (int w = 0; w < 8; ++w) text << (w ? " " : "") << 't' << topic << 'w' << rng() % kWordsPerTopic;
    text << '\n';
  }
  return text.str();
}

Word2VecOptions small_run(const fs::path& corpus) {
  Word2VecOptions o;
  o.corpus = corpus.string();
  o.dim = 16;
  o.min_count = 1;
  o.sample = 0.0;
  o.cbow = false;
  o.workers = 2;
  o.epochs = 4;
  o.seed = 3;
  return o;
}

// The share of each word's 3 nearest words that are of its topic.
double topic_purity(const fs::path& vectors) {
  const EmbeddingIndex index(read_word2vec(vectors));
  std::size_t same = 0, all = 0;
  for (std::size_t id = 0; id < index.size(); ++id) {
    for (const auto& [word, cosine] : index.nearest(id, 3)) {
      same += word[1] == index.word(id)[1];
      ++all;
    }
  }
  return static_cast<double>(same) / static_cast<double>(all);
}

}  // namespace

TEST(TrainWord2Vec, LearnsPlantedTopicsAndWritesTheVectors) {
  ScratchDir dir;
  Word2VecOptions o = small_run(dir.file("corpus.txt", planted_text(1500)));
  o.output = (dir / "vectors.txt").string();
  asgd::RankGroup one_process;
  const Word2VecReport r = train_word2vec(o, one_process);
  EXPECT_FALSE(r.train.stopped);
  EXPECT_EQ(r.vocabulary, std::size_t{kTopics * kWordsPerTopic});
  EXPECT_EQ(r.epochs, 4u);
  ASSERT_EQ(r.train.epochs.size(), 4u);
  EXPECT_EQ(r.start.corpus.tokens, 1500u * 8);
  EXPECT_EQ(r.start.now.corpus_tokens, 1500u * 8);
  const Embeddings written = read_word2vec(o.output);
  EXPECT_EQ(written.size(), r.vocabulary);
  EXPECT_EQ(written.dim, 16u);
  EXPECT_GT(topic_purity(o.output), 0.9);
}

// Unset, the run shares negatives across a window (HogBatch) wherever the objective allows it; batch false is
// word2vec.c's per-pair update. Both learn the topics.
TEST(TrainWord2Vec, HogBatchIsTheDefaultWhereItApplies) {
  ScratchDir dir;
  const Word2VecOptions base = small_run(dir.file("corpus.txt", planted_text(1500)));
  asgd::RankGroup one_process;
  const auto run = [&](auto&& change) {
    Word2VecOptions o = base;
    change(o);
    return train_word2vec(o, one_process).model;
  };
  EXPECT_TRUE(run([](Word2VecOptions&) {}).batch);
  EXPECT_FALSE(run([](Word2VecOptions& o) { o.batch = false; }).batch);
  EXPECT_FALSE(run([](Word2VecOptions& o) { o.cbow = true; }).batch);
  EXPECT_FALSE(run([](Word2VecOptions& o) { o.hs = true; }).batch);
  EXPECT_FALSE(run([](Word2VecOptions& o) {
                 o.hs = true;
                 o.negative = 0;
               }).batch);
  for (const bool batch : {true, false}) {
    Word2VecOptions o = base;
    o.batch = batch;
    o.output = (dir / "vectors.txt").string();
    train_word2vec(o, one_process);
    EXPECT_GT(topic_purity(o.output), 0.9) << "batch " << batch;
  }
}

TEST(TrainWord2Vec, EventsComeBeforeTheFilesAndTheStopRequestIsHeard) {
  ScratchDir dir;
  Word2VecOptions o = small_run(dir.file("corpus.txt", planted_text(300)));
  o.output = (dir / "vectors.bin").string();
  o.binary = true;
  asgd::RankGroup one_process;
  std::vector<std::string> seen;
  Word2VecEvents events;
  events.on_start = [&](const Word2VecStart& s, asgd::TrainingRun&) {
    seen.push_back("start " + std::to_string(s.vocabulary) + (s.resumed ? " resumed" : ""));
  };
  events.on_trained = [&](const Word2VecReport& r) {
    seen.push_back(std::string("trained") + (fs::exists(o.output) ? " after the vectors" : ""));
    EXPECT_FALSE(r.already_finished);
  };
  train_word2vec(o, one_process, events);
  EXPECT_EQ(seen, (std::vector<std::string>{"start 32", "trained"}));
  EXPECT_TRUE(is_word2vec_binary(o.output));

  // A stop asked for before the first epoch: nothing trained past it, nothing written.
  fs::remove(o.output);
  events.on_start = [](const Word2VecStart&, asgd::TrainingRun& run) { run.request_stop(); };
  events.on_trained = {};
  const Word2VecReport stopped = train_word2vec(o, one_process, events);
  EXPECT_TRUE(stopped.train.stopped);
  EXPECT_FALSE(fs::exists(o.output));
}

TEST(TrainWord2Vec, KeptVectorsAreTheRowsWritten) {
  ScratchDir dir;
  Word2VecOptions o = small_run(dir.file("corpus.txt", planted_text(300)));
  o.workers = 1;
  o.output = (dir / "vectors.bin").string();
  o.binary = true;  // float32 as trained: the kept rows compare exactly
  asgd::RankGroup one_process;
  EXPECT_FALSE(train_word2vec(o, one_process).vectors);  // only when asked for
  const Embeddings written = read_word2vec(o.output);
  o.keep_vectors = true;
  o.output = (dir / "again.bin").string();
  const Word2VecReport r = train_word2vec(o, one_process);
  ASSERT_TRUE(r.vectors);
  EXPECT_EQ(r.vectors->words, written.words);
  EXPECT_EQ(r.vectors->dim, 16u);
  EXPECT_EQ(r.vectors->vectors, written.vectors);  // one worker, one seed: the same run

  // Without an output file the vectors are still kept; a stopped run keeps none.
  o.output.clear();
  EXPECT_EQ(train_word2vec(o, one_process).vectors->vectors, written.vectors);
  Word2VecEvents stop_at_once;
  stop_at_once.on_start = [](const Word2VecStart&, asgd::TrainingRun& run) { run.request_stop(); };
  EXPECT_FALSE(train_word2vec(o, one_process, stop_at_once).vectors);
}

TEST(TrainWord2Vec, ACheckpointGoesOnAndAFinishedOneIsWrittenAgain) {
  ScratchDir dir;
  Word2VecOptions o = small_run(dir.file("corpus.txt", planted_text(300)));
  o.epochs = 2;
  o.checkpoint = (dir / "run.ckpt").string();
  asgd::RankGroup one_process;
  train_word2vec(o, one_process);

  Word2VecOptions more;  // the model and its vocabulary come from the checkpoint
  more.corpus = o.corpus;
  more.resume = o.checkpoint;
  more.checkpoint = o.checkpoint;
  more.epochs = 3;
  const Word2VecReport r = train_word2vec(more, one_process);
  EXPECT_TRUE(r.start.resumed);
  EXPECT_EQ(r.start.saved.iter, 2u);
  EXPECT_EQ(r.workers, 2u);  // the run's own
  ASSERT_EQ(r.train.epochs.size(), 1u);
  EXPECT_EQ(r.train.epochs.front().epoch, 3u);

  // Finished: no corpus needed, the vectors written as they are, and the checkpoint copied where asked.
  Word2VecOptions again;
  again.resume = o.checkpoint;
  again.output = (dir / "again.txt").string();
  again.checkpoint = (dir / "copy.ckpt").string();
  bool told = false;
  Word2VecEvents events;
  events.on_trained = [&](const Word2VecReport& finished) { told = finished.already_finished; };
  const Word2VecReport f = train_word2vec(again, one_process, events);
  EXPECT_TRUE(told);
  EXPECT_TRUE(f.already_finished);
  EXPECT_EQ(f.resumed_epochs, 3u);
  EXPECT_TRUE(f.checkpoint_copied);
  EXPECT_TRUE(fs::exists(again.checkpoint));
  EXPECT_EQ(read_word2vec(again.output).size(), std::size_t{kTopics * kWordsPerTopic});
}

TEST(TrainWord2Vec, ClassesAreWrittenInsteadOfTheVectors) {
  ScratchDir dir;
  Word2VecOptions o = small_run(dir.file("corpus.txt", planted_text(300)));
  o.output = (dir / "classes.txt").string();
  o.classes = 4;
  asgd::RankGroup one_process;
  const Word2VecReport r = train_word2vec(o, one_process);
  ASSERT_TRUE(r.classes.has_value());
  EXPECT_EQ(r.classes->of.size(), r.vocabulary);
  std::ifstream in(o.output);
  std::string word;
  std::uint32_t cls = 0;
  std::size_t lines = 0;
  while (in >> word >> cls) lines += cls < 4;
  EXPECT_EQ(lines, r.vocabulary);
}

// What changed the input trained is said as notes, in the order of reading; none for a plain corpus.
TEST(TrainWord2Vec, StartNotesSayWhatChangedTheInput) {
  Word2VecStart s;
  EXPECT_EQ(s.notes(), "");
  s.corpus.split_lines = 2;
  s.read_vocab_left_out = 1;
  EXPECT_EQ(s.notes(), fmt::format("; 2 line(s) split at {} words; 1 Word2VecOptions::read_vocab word(s) with \\v, "
                                   "\\f or \\r left out (no token can match)",
                                   kMaxSentence));
  s = {};
  s.corpus.truncated_tokens = 3;
  s.corpus.vocabulary_prunes = 1;
  EXPECT_NE(s.notes().find("; 3 token(s) cut to "), std::string::npos) << s.notes();
  EXPECT_NE(s.notes().find("1 time(s): a rare word may be missing"), std::string::npos) << s.notes();
}

TEST(TrainWord2Vec, BadOptionsAreNamed) {
  ScratchDir dir;
  const Word2VecOptions good = small_run(dir.file("corpus.txt", planted_text(50)));
  asgd::RankGroup one_process;
  const auto error = [&](auto change) {
    Word2VecOptions o = good;
    change(o);
    return message_of([&] { train_word2vec(o, one_process); });
  };
  EXPECT_EQ(error([](auto& o) { o.corpus.clear(); }), "Word2VecOptions::corpus: required (the text to train on)");
  EXPECT_EQ(error([](auto& o) { o.workers = 0; }), "Word2VecOptions::workers 0: expected 1 to 1024");
  EXPECT_EQ(error([](auto& o) { o.epochs = 0; }), "Word2VecOptions::epochs 0: expected 1 to 1000000 epochs");
  EXPECT_EQ(error([](auto& o) { o.classes = 3; }), "Word2VecOptions::classes: give Word2VecOptions::output, where the classes go");
  EXPECT_EQ(error([](auto& o) { o.alpha = 0.0f; }), "Word2VecOptions::alpha 0: expected a finite rate > 0");
  EXPECT_EQ(error([](auto& o) { o.policy = "sloppy"; }).rfind("Word2VecOptions::policy: ", 0), 0u);
  EXPECT_EQ(error([&](auto& o) { o.classes = 99, o.output = (dir / "c.txt").string(); }),
            "Word2VecOptions::classes 99: more classes than the vocabulary's 32 words");
  const std::string shared = error([&](auto& o) { o.output = o.corpus; });
  EXPECT_EQ(shared.rfind("Word2VecOptions::output: ", 0), 0u) << shared;
  EXPECT_NE(shared.find("is also Word2VecOptions::corpus's file"), std::string::npos) << shared;
}
