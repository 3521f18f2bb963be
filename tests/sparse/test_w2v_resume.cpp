// resume_word2vec: a checkpoint to go on from, checked against the options
// of the run that resumes it (the model and vocabulary are the checkpoint's).
#include <gtest/gtest.h>

#include <string>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/word2vec/checkpoint_file.hpp"
#include "asgd/sparse/word2vec/resume.hpp"
#include "asgd/sparse/word2vec/training.hpp"

namespace fs = std::filesystem;
using namespace asgd::sparse::w2v;
using asgd::testing::message_of;
using asgd::testing::ScratchDir;

namespace {

// A checkpoint of 2 epochs: skip-gram, dim 8, 3 workers, atomic updates, min-count 2, seed 9, vocabulary a b c d.
struct Checkpointed {
  ScratchDir dir;
  std::string corpus, checkpoint;
  Checkpointed() {
    corpus = dir.file("corpus.txt", "a b c d a b c d\nd c b a a b\nc d a b d c\n").string();
    checkpoint = (dir / "run.ckpt").string();
    Word2VecOptions o;
    o.corpus = corpus;
    o.checkpoint = checkpoint;
    o.cbow = false;
    o.dim = 8;
    o.workers = 3;
    o.policy = "atomic";
    o.min_count = 2;
    o.seed = 9;
    o.epochs = 2;
    asgd::RankGroup one_process;
    train_word2vec(o, one_process);
  }
  Word2VecOptions resume() const {
    Word2VecOptions o;
    o.corpus = corpus;
    o.resume = checkpoint;
    return o;
  }
};

}  // namespace

TEST(ResumeWord2Vec, SettingsThatChangeTheUpdatesAreToldWhereRecorded) {
  RunInfo saved;
  saved.alpha = 0.025f;
  saved.threads = 4;
  saved.policy = "racy";
  saved.tau = "inf";
  RunInfo now = saved;
  EXPECT_TRUE(changed_settings(saved, now).empty());
  now.alpha = 0.05f;
  now.policy = "atomic";
  const auto changes = changed_settings(saved, now);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].key, "alpha");
  EXPECT_EQ(changes[0].now, "0.05");
  EXPECT_EQ(changes[0].before, "0.025");
  EXPECT_EQ(changes[1].key, "policy");
  // Not recorded (an older asgd's checkpoint): nothing to compare.
  EXPECT_TRUE(changed_settings(RunInfo{}, now).empty());
}

TEST(ResumeWord2Vec, TakesTheModelVocabularyAndUpdatesOfTheRun) {
  const Checkpointed run;
  Word2VecOptions o = run.resume();
  o.dim = 8;  // the same value again is no change
  o.seed = 9;
  o.min_count = 2;
  const ResumedRun r = resume_word2vec(o);
  EXPECT_FALSE(r.model.cbow);
  EXPECT_EQ(r.model.dim, 8u);
  EXPECT_EQ(r.vocab.size(), 4u);
  EXPECT_EQ(r.checkpoint.state.epoch, 2u);
  EXPECT_EQ(r.saved.iter, 2u);
  EXPECT_EQ(r.workers, 3u);
  EXPECT_EQ(r.consistency, asgd::Consistency::atomic);
  o.workers = 1;  // how it updates may change (the caller warns)
  o.policy = "racy";
  const ResumedRun changed = resume_word2vec(o);
  EXPECT_EQ(changed.workers, 1u);
  EXPECT_EQ(changed.consistency, asgd::Consistency::racy);
}

TEST(ResumeWord2Vec, AnOptionThatWouldChangeTheModelIsRefusedByName) {
  const Checkpointed run;
  const auto error = [&](auto change) {
    Word2VecOptions o = run.resume();
    change(o);
    return message_of([&] { resume_word2vec(o); });
  };
  EXPECT_EQ(error([](auto& o) { o.dim = 16; }),
            "Word2VecOptions::dim 16: " + run.checkpoint +
                " was trained with 8; the model and its seed come from the checkpoint on Word2VecOptions::resume");
  EXPECT_EQ(error([](auto& o) { o.cbow = true; }).rfind("Word2VecOptions::cbow 1: ", 0), 0u);
  EXPECT_EQ(error([](auto& o) { o.seed = 1; }).rfind("Word2VecOptions::seed 1: ", 0), 0u);
  EXPECT_EQ(error([](auto& o) { o.min_count = 1; }),
            "Word2VecOptions::min_count 1: " + run.checkpoint +
                " was made with Word2VecOptions::min_count 2; the vocabulary comes from the checkpoint on "
                "Word2VecOptions::resume");
  EXPECT_EQ(error([](auto& o) { o.classes = 5; }),
            "Word2VecOptions::classes 5: more classes than the vocabulary's 4 words");
  const std::string other = run.dir.file("other.vocab", "a 9\nb 9\n").string();
  EXPECT_EQ(error([&](auto& o) { o.read_vocab = other; }),
            "Word2VecOptions::read_vocab " + other + ": not the vocabulary of " + run.checkpoint +
                ", which the run continues on Word2VecOptions::resume");
}

// A damaged header: a key missing, or of another kind, is said in plain words with the file and the key (before:
// "[json.exception.out_of_range.403] key 'window' not found").
TEST(ResumeWord2Vec, ADamagedHeaderNamesTheFileAndTheKeyInPlainWords) {
  const Checkpointed run;
  const asgd::CheckpointData good = asgd::read_checkpoint(run.checkpoint);
  const auto forged = [&](const std::string& from, const std::string& to) {
    std::string metadata = good.metadata;
    const auto at = metadata.find(from);
    EXPECT_LT(at, metadata.find('\n')) << from << " in " << metadata;
    metadata.replace(at, from.size(), to);
    const std::string path = (run.dir / "forged.ckpt").string();
    auto store = asgd::ParamStore::on_heap(good.layout);
    store.assign(good.params);
    asgd::save_checkpoint(path, store, good.state, {}, metadata);
    Word2VecOptions o = run.resume();
    o.resume = path;
    return message_of([&] { resume_word2vec(o); });
  };
  const std::string where = "checkpoint " + (run.dir / "forged.ckpt").string() + ": its metadata ";
  struct Case {
    std::string from, to, message;
  };
  const Case cases[] = {
      {"\"window\":5,", "", where + "has no 'window'"},
      {"\"cbow\":false", "\"cbow\":1", where + "is malformed: cbow is 1, not true or false"},
      {"\"sample\":0.001", "\"sample\":\"x\"", where + "is malformed: sample is \"x\", not a number"},
      {"\"policy\":\"atomic\"", "\"policy\":3", where + "is malformed: policy is 3, not a string"},
      {"\"words\":4", "\"words\":[4]", where + "is malformed: words is [4], not a whole number"},
      {"\"alpha\":", "\"alpha\":null,\"x\":", where + "is malformed: alpha is null, not a number"},
  };
  for (const auto& c : cases) {
    const std::string message = forged(c.from, c.to);
    EXPECT_EQ(message, c.message);
    EXPECT_EQ(message.find("json"), std::string::npos) << message;
  }
}

// A header that records no words (and no vocabulary lines follow) is no checkpoint a run wrote: training refuses a
// corpus without words, so such metadata is corrupt, and is refused naming the file, not handed on as an empty
// vocabulary to size a model by.
TEST(ResumeWord2Vec, MetadataThatRecordsNoWordsIsRefusedNamingTheFile) {
  const Checkpointed run;
  const std::string metadata = asgd::read_checkpoint(run.checkpoint).metadata;
  std::string header = metadata.substr(0, metadata.find('\n') + 1);
  const auto at = header.find("\"words\":4");
  ASSERT_NE(at, std::string::npos) << header;
  header.replace(at, 9, "\"words\":0");
  const std::string message = message_of([&] { (void)read_checkpoint_metadata("empty.ckpt", header); });
  EXPECT_EQ(message, "empty.ckpt: corrupt word2vec checkpoint metadata: it records no words");
}
